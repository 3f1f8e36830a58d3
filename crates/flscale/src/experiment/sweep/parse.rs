//! Reading an experiment file into a [`Sweep`]: the `[sweep]`, `[analysis]`, `[quick]`,
//! `[slurm]` and `[free_energy]` tables are taken out, checked, and the rest is the base
//! experiment of every grid point.

use toml::{Table, Value};

use super::axis::{check_field, make_axis, Axis, DERIVED};
use super::spec::{AnalysisSpec, PstarSource};
use super::value::{flatten, set_field};
use super::Sweep;
use crate::error::{Error, Result};
use crate::experiment::slurm::SlurmSpec;
use crate::free_energy::config::FreeEnergyConfig;

impl Sweep {
    /// Parses an experiment file with optional `[sweep]`, `[analysis]` and `[quick]` tables;
    /// `quick` applies the `[quick]` overrides. Every grid point is built and validated by the
    /// engine's loader, so an invalid grid fails here, before any run starts.
    pub fn from_toml(text: &str, source: &str, quick: bool) -> Result<Sweep> {
        let mut doc: Table =
            toml::from_str(text).map_err(|e| crate::error::toml_error(source, text, &e))?;
        let sweep = take_table(&mut doc, "sweep", source)?;
        let analysis_t = take_table(&mut doc, "analysis", source)?;
        let quick_t = take_table(&mut doc, "quick", source)?;
        let slurm = parse_slurm(take_table(&mut doc, "slurm", source)?, source)?;
        let free_energy = parse_free_energy(take_table(&mut doc, "free_energy", source)?, source)?;
        let ctx = |e: Error| e.context(source);
        let mut axes = Vec::new();
        let mut follow = Vec::new();
        if let Some(sweep) = &sweep {
            let mut leaves = Vec::new();
            for (k, v) in sweep {
                if k == "follow" {
                    let Value::Table(f) = v else {
                        return Err(ctx(Error::invalid(
                            "sweep.follow must be a table such as { \"model.widths\" = \"data.d\" }",
                        )));
                    };
                    let mut links = Vec::new();
                    flatten("", f, &mut links);
                    for (target, src) in links {
                        let Value::String(src) = src else {
                            return Err(ctx(Error::invalid(format!(
                                "sweep.follow.\"{target}\" must name a field as a string, e.g. \"data.d\""
                            ))));
                        };
                        check_field(&target, "sweep.follow").map_err(ctx)?;
                        check_field(&src, &format!("sweep.follow.\"{target}\"")).map_err(ctx)?;
                        follow.push((target, src));
                    }
                    continue;
                }
                match v {
                    Value::Table(t) => flatten(k, t, &mut leaves),
                    other => leaves.push((k.clone(), other.clone())),
                }
            }
            if leaves.is_empty() {
                return Err(ctx(Error::invalid(
                    "[sweep] lists no field, which is not allowed; give at least one list, e.g. data.d = [10, 20, 40], or remove [sweep]",
                )));
            }
            for (path, v) in leaves {
                axes.push(make_axis(&path, v).map_err(ctx)?);
            }
        }
        if let Some(q) = &quick_t {
            if quick {
                apply_quick(&mut doc, &mut axes, q).map_err(ctx)?;
            } else {
                // Still validated, so that a broken [quick] table is found early.
                let mut d2 = doc.clone();
                let mut a2 = axes.clone();
                apply_quick(&mut d2, &mut a2, q).map_err(ctx)?;
            }
        }
        axes.sort_by(|a, b| a.field.cmp(&b.field));
        let fields: Vec<&str> = axes.iter().map(|a| a.field.as_str()).collect();
        if fields.contains(&"data.p") && fields.contains(&"data.p_over_d") {
            return Err(ctx(Error::invalid(
                "[sweep] lists both data.p and data.p_over_d, which is not allowed; keep one",
            )));
        }
        if fields.contains(&"model.widths") && fields.contains(&"model.width") {
            return Err(ctx(Error::invalid(
                "[sweep] lists both model.widths and model.width, which is not allowed; keep one",
            )));
        }
        let analysis: AnalysisSpec = match analysis_t {
            Some(t) => Value::Table(t).try_into().map_err(|e: toml::de::Error| {
                ctx(Error::invalid(format!(
                    "[analysis]: {}",
                    e.to_string().trim_end().replace('\n', " ")
                )))
            })?,
            None => AnalysisSpec::default(),
        };
        if !(analysis.threshold.is_finite()) {
            return Err(ctx(Error::invalid(format!(
                "analysis.threshold = {} is not allowed; it must be a finite number",
                analysis.threshold
            ))));
        }
        if !(analysis.pstar_resolution.is_finite() && analysis.pstar_resolution > 1.0) {
            return Err(ctx(Error::invalid(format!(
                "analysis.pstar_resolution = {} is not allowed; it is a bracket factor x_hi/x_lo above 1, e.g. 1.1",
                analysis.pstar_resolution
            ))));
        }
        if analysis.pstar == PstarSource::Coexistence && free_energy.is_none() {
            return Err(ctx(Error::invalid(
                "analysis.pstar = \"coexistence\" needs a [free_energy] table, since the thresholds come from the free energy at every grid point; add one (docs/free-energy.md) or remove pstar",
            )));
        }
        let mut sw = Sweep {
            source: source.to_string(),
            base: doc,
            axes,
            follow,
            analysis,
            runs: Vec::new(),
            quick,
            slurm,
            free_energy,
        };
        sw.runs = sw.expand()?;
        Ok(sw)
    }
}

/// `[slurm]`, validated.
fn parse_slurm(t: Option<Table>, source: &str) -> Result<SlurmSpec> {
    let Some(t) = t else {
        return Ok(SlurmSpec::default());
    };
    let spec: SlurmSpec = Value::Table(t).try_into().map_err(|e: toml::de::Error| {
        Error::invalid(format!(
            "{source}: [slurm]: {}",
            e.to_string().trim_end().replace('\n', " ")
        ))
    })?;
    spec.validate(&format!("{source} [slurm]"))?;
    Ok(spec)
}

/// `[free_energy]`, parsed (unknown fields and wrong types refused in one line).
fn parse_free_energy(t: Option<Table>, source: &str) -> Result<Option<FreeEnergyConfig>> {
    let Some(t) = t else {
        return Ok(None);
    };
    Value::Table(t)
        .try_into()
        .map(Some)
        .map_err(|e: toml::de::Error| {
            Error::invalid(format!(
                "{source}: [free_energy]: {}",
                e.to_string().trim_end().replace('\n', " ")
            ))
        })
}

fn take_table(doc: &mut Table, name: &str, source: &str) -> Result<Option<Table>> {
    match doc.remove(name) {
        None => Ok(None),
        Some(Value::Table(t)) => Ok(Some(t)),
        Some(_) => Err(Error::invalid(format!(
            "{source}: `{name}` must be a table ([{name}])"
        ))),
    }
}

/// `[quick]`: `set` overrides fields of the base experiment, `sweep` replaces axes.
fn apply_quick(doc: &mut Table, axes: &mut Vec<Axis>, q: &Table) -> Result<()> {
    for (k, v) in q {
        match (k.as_str(), v) {
            ("set", Value::Table(t)) => {
                let mut leaves = Vec::new();
                flatten("", t, &mut leaves);
                for (path, v) in leaves {
                    check_field(&path, "quick.set")?;
                    if DERIVED.contains(&path.as_str()) {
                        return Err(Error::invalid(format!(
                            "quick.set names `{path}`, a derived field that only [sweep] can list"
                        )));
                    }
                    set_field(doc, &path, v)?;
                }
            }
            ("sweep", Value::Table(t)) => {
                let mut leaves = Vec::new();
                flatten("", t, &mut leaves);
                for (path, v) in leaves {
                    let axis = make_axis(&path, v)?;
                    match axes.iter_mut().find(|a| a.field == axis.field) {
                        Some(a) => *a = axis,
                        None => axes.push(axis),
                    }
                }
            }
            (other, _) => {
                return Err(Error::invalid(format!(
                    "quick.{other} is not allowed; [quick] takes the tables set and sweep"
                )))
            }
        }
    }
    Ok(())
}
