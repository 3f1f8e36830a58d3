//! The free-energy cells of a sweep: each grid point's experiment with the file's
//! `[free_energy]` table, named as the sweep runner names the point.

use std::collections::BTreeMap;

use toml::Value;

use super::Sweep;
use crate::error::{Error, Result};
use crate::free_energy::window::FreeEnergyPlan;

/// One grid point of a free-energy sweep: its free-energy plan and how the sweep names it.
#[derive(Debug, Clone)]
pub struct FreeEnergyCell {
    /// Position in the full grid (as [`RunPlan::index`](super::RunPlan::index)).
    pub index: usize,
    /// Directory name, `run-00012` (as [`RunPlan::id`](super::RunPlan::id)).
    pub id: String,
    /// The point as the sweep runner shows it ([`RunPlan::label`](super::RunPlan::label)).
    pub label: String,
    /// The swept fields' values at this point, in axis order.
    pub point: Vec<(String, Value)>,
    /// The resolved coordinates (d, p, …; [`RunPlan::coordinates`](super::RunPlan::coordinates)).
    pub coordinates: BTreeMap<String, f64>,
    /// The point's experiment with the `[free_energy]` table, checked.
    pub plan: FreeEnergyPlan,
}

impl Sweep {
    /// One free-energy plan per grid point: each point's experiment with the file's
    /// `[free_energy]` table, checked against that point's model, in grid order. Each cell
    /// carries the id and label the sweep runner gives the same point (`run-00012`,
    /// `data.d=8 data.p_over_d=4`), so that a driver can run each cell's windows in its own
    /// directory. A missing table or a point the table does not fit is refused in one sentence
    /// naming the point (exit code 2).
    pub fn free_energy_plans(&self) -> Result<Vec<FreeEnergyCell>> {
        let source = &self.source;
        let table = self.free_energy.clone().ok_or_else(|| {
            Error::invalid(format!(
                "{source} has no [free_energy] table; add one such as [free_energy] order_parameter = \"neuron_overlap\", neuron = 0, windows = 16 (docs/free-energy.md)"
            ))
        })?;
        self.runs
            .iter()
            .map(|r| {
                let label = r.label();
                let plan = FreeEnergyPlan::new(r.config.clone(), table.clone()).map_err(|e| {
                    if label.is_empty() {
                        e.context(source)
                    } else {
                        e.context(format!("{source} at the grid point {label}"))
                    }
                })?;
                Ok(FreeEnergyCell {
                    index: r.index,
                    id: r.id.clone(),
                    label,
                    point: r.point.clone(),
                    coordinates: r.coordinates(),
                    plan,
                })
            })
            .collect()
    }

    /// The free-energy plan of a file without a grid ([`Sweep::free_energy_plans`] of its one
    /// point). A grid is refused in one sentence (exit code 2): `flscale free-energy` runs one
    /// experiment, a driver over cells calls [`Sweep::free_energy_plans`].
    pub fn free_energy_plan(&self) -> Result<FreeEnergyPlan> {
        if self.runs.len() != 1 {
            return Err(Error::invalid(format!(
                "{}: [sweep] lists {} grid points, but a free-energy run is one experiment; remove [sweep] (or write one file per point)",
                self.source,
                self.runs.len()
            )));
        }
        let mut cells = self.free_energy_plans()?;
        Ok(cells.remove(0).plan)
    }
}
