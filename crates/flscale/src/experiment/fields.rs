//! The field paths of a configuration type, read from its `serde::Deserialize` implementation.
//!
//! A derived `Deserialize` for a struct calls `deserialize_struct(name, FIELDS, visitor)` with
//! the names of all its fields — including optional ones, which serialising a value would
//! drop when they are `None`. [`field_paths`] runs that implementation against a deserializer
//! that records those lists and answers every other request with a placeholder (zero, empty
//! text, an empty list, `None`, an enum's first variant), recursing into nested structs. So
//! the set of sweepable fields of [`crate::sim::ExperimentConfig`] follows the config types:
//! a field added to the engine's file is sweepable without touching the sweep code.
//!
//! Limits: an `Option<Struct>`'s inner fields are not visited (the placeholder is `None`), nor
//! are fields behind `#[serde(flatten)]` or a hand-written `Deserialize` that asks for
//! `deserialize_any`. The experiment config has none of these; a test compares the result
//! with the leaves of a serialised, fully populated config.

use serde::de::value::{Error as DeError, StrDeserializer};
use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

/// Every leaf field of `T` as a dotted path (`data.d`, `sampler.seed`), in declaration order.
/// Nested structs contribute their leaves, not themselves.
pub fn field_paths<'de, T: Deserialize<'de>>() -> Vec<String> {
    let mut out = Vec::new();
    // The placeholders always satisfy a derived implementation; an error can only come from
    // a hand-written one, and then the paths recorded up to that point are still returned.
    let _ = T::deserialize(Tracer {
        path: String::new(),
        out: &mut out,
    });
    out
}

struct Tracer<'a> {
    path: String,
    out: &'a mut Vec<String>,
}

impl Tracer<'_> {
    fn leaf(self) {
        if !self.path.is_empty() {
            self.out.push(self.path);
        }
    }
}

struct Empty;

impl<'de> SeqAccess<'de> for Empty {
    type Error = DeError;
    fn next_element_seed<S: DeserializeSeed<'de>>(
        &mut self,
        _seed: S,
    ) -> Result<Option<S::Value>, DeError> {
        Ok(None)
    }
}

impl<'de> MapAccess<'de> for Empty {
    type Error = DeError;
    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        _seed: K,
    ) -> Result<Option<K::Value>, DeError> {
        Ok(None)
    }
    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, _seed: V) -> Result<V::Value, DeError> {
        Err(de::Error::custom("no value"))
    }
}

/// Hands out every field of a struct once, each value traced under `prefix.field`.
struct Fields<'a> {
    prefix: String,
    fields: &'static [&'static str],
    next: usize,
    out: &'a mut Vec<String>,
}

impl<'de> MapAccess<'de> for Fields<'_> {
    type Error = DeError;
    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, DeError> {
        match self.fields.get(self.next) {
            Some(name) => {
                let key: StrDeserializer<'_, DeError> = name.into_deserializer();
                seed.deserialize(key).map(Some)
            }
            None => Ok(None),
        }
    }
    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, DeError> {
        let name = self.fields[self.next];
        self.next += 1;
        let path = if self.prefix.is_empty() {
            name.to_string()
        } else {
            format!("{}.{name}", self.prefix)
        };
        seed.deserialize(Tracer {
            path,
            out: &mut *self.out,
        })
    }
}

macro_rules! leaf_with {
    ($($method:ident => |$v:ident| $body:expr;)*) => {
        $(
            fn $method<V: Visitor<'de>>(self, $v: V) -> Result<V::Value, DeError> {
                self.leaf();
                $body
            }
        )*
    };
}

impl<'de> de::Deserializer<'de> for Tracer<'_> {
    type Error = DeError;

    leaf_with! {
        deserialize_any => |v| v.visit_unit();
        deserialize_bool => |v| v.visit_bool(false);
        deserialize_i8 => |v| v.visit_i64(0);
        deserialize_i16 => |v| v.visit_i64(0);
        deserialize_i32 => |v| v.visit_i64(0);
        deserialize_i64 => |v| v.visit_i64(0);
        deserialize_u8 => |v| v.visit_u64(0);
        deserialize_u16 => |v| v.visit_u64(0);
        deserialize_u32 => |v| v.visit_u64(0);
        deserialize_u64 => |v| v.visit_u64(0);
        deserialize_f32 => |v| v.visit_f64(0.0);
        deserialize_f64 => |v| v.visit_f64(0.0);
        deserialize_char => |v| v.visit_char('x');
        deserialize_str => |v| v.visit_str("");
        deserialize_string => |v| v.visit_str("");
        deserialize_bytes => |v| v.visit_bytes(&[]);
        deserialize_byte_buf => |v| v.visit_bytes(&[]);
        deserialize_option => |v| v.visit_none();
        deserialize_unit => |v| v.visit_unit();
        deserialize_seq => |v| v.visit_seq(Empty);
        deserialize_map => |v| v.visit_map(Empty);
        deserialize_identifier => |v| v.visit_str("");
        deserialize_ignored_any => |v| v.visit_unit();
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.leaf();
        visitor.visit_unit()
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.leaf();
        visitor.visit_seq(Empty)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.leaf();
        visitor.visit_seq(Empty)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        visitor.visit_map(Fields {
            prefix: self.path,
            fields,
            next: 0,
            out: self.out,
        })
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.leaf();
        let first = variants.first().copied().unwrap_or("");
        let variant: StrDeserializer<'_, DeError> = first.into_deserializer();
        visitor.visit_enum(variant)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::ExperimentConfig;

    #[derive(Deserialize)]
    #[allow(dead_code)]
    struct Inner {
        a: f64,
        b: Option<Vec<(usize, f64)>>,
    }

    #[derive(Deserialize)]
    #[allow(dead_code)]
    #[serde(rename_all = "kebab-case")]
    enum Kind {
        First,
        Second,
    }

    #[derive(Deserialize)]
    #[allow(dead_code)]
    struct Outer {
        inner: Inner,
        kind: Kind,
        #[serde(rename = "n-max", default)]
        n_max: usize,
        flag: bool,
    }

    #[test]
    fn paths_follow_the_serde_names_including_optional_fields() {
        assert_eq!(
            field_paths::<Outer>(),
            ["inner.a", "inner.b", "kind", "n-max", "flag"]
        );
    }

    fn leaves(prefix: &str, v: &toml::Value, out: &mut Vec<String>) {
        match v {
            toml::Value::Table(t) => {
                for (k, x) in t {
                    let p = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    leaves(&p, x, out);
                }
            }
            _ => out.push(prefix.to_string()),
        }
    }

    #[test]
    fn experiment_fields_cover_a_serialised_config_with_every_option_set() {
        let paths = field_paths::<ExperimentConfig>();
        // Independent reference: the leaves of parsed configs with every optional field given,
        // a CNN's (`patch`) and an attention model's (`heads`).
        let text = r#"
[model]
kind = "cnn"
activation = "erf"
widths = [8]
patch = 4
[data]
d = 8
p = 40
tokens = 3
[target]
hermite = 3
terms = [[1, 1.0]]
parity = 2
[sampler]
kappa = 1.0
step = 1e-3
steps = 200
burn_in = 100
thin = 10
chains = 4
seed = 1
preconditioner = "block"
metric = "diag"
hmc_steps = 10
starts_coupling = "coupled"
tempering = { replicas = 4, adapt = true, beta_min = 0.05, swap_every = 3, max_replicas = 8 }
[priors]
sigma2 = [1.0, 1.0]
"#;
        let attention = text
            .replace("kind = \"cnn\"", "kind = \"attention\"")
            .replace("patch = 4", "heads = 2");
        let mut want = Vec::new();
        for text in [text, attention.as_str()] {
            let config: ExperimentConfig = toml::from_str(text).unwrap();
            leaves("", &toml::Value::try_from(&config).unwrap(), &mut want);
        }
        want.sort();
        want.dedup();
        let mut got = paths.clone();
        got.sort();
        assert_eq!(got, want);
        for p in ["data.d", "sampler.seed", "target.hermite", "priors.sigma2"] {
            assert!(paths.iter().any(|x| x == p), "{p}: {paths:?}");
        }
    }
}
