//! TOML values and dotted field paths (`data.d`): the number a value holds, its compact
//! rendering in messages and CSV cells, its JSON form for the manifest, and reading and
//! writing one field of an experiment table.

use toml::{Table, Value};

use crate::error::{Error, Result};

/// A TOML value as a number, if it is one.
pub fn as_f64(v: &Value) -> Option<f64> {
    match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Float(f) => Some(*f),
        _ => None,
    }
}

/// A compact, comma-free rendering of a value for CSV cells and messages (`[40;40]`).
pub fn show_value(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(show_value).collect::<Vec<_>>().join(";")
        ),
        other => other.to_string(),
    }
}

/// Converts a TOML value to JSON (datetimes become strings).
pub fn toml_to_json(v: &Value) -> serde_json::Value {
    match v {
        Value::String(s) => serde_json::Value::String(s.clone()),
        Value::Integer(i) => serde_json::json!(i),
        Value::Float(f) => serde_json::json!(f),
        Value::Boolean(b) => serde_json::json!(b),
        Value::Datetime(d) => serde_json::Value::String(d.to_string()),
        Value::Array(a) => serde_json::Value::Array(a.iter().map(toml_to_json).collect()),
        Value::Table(t) => serde_json::Value::Object(
            t.iter()
                .map(|(k, v)| (k.clone(), toml_to_json(v)))
                .collect(),
        ),
    }
}

pub(super) fn flatten(prefix: &str, table: &Table, out: &mut Vec<(String, Value)>) {
    for (k, v) in table {
        let path = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            Value::Table(t) => flatten(&path, t, out),
            other => out.push((path, other.clone())),
        }
    }
}

fn get_mut_path<'a>(table: &'a mut Table, path: &str) -> Result<&'a mut Table> {
    let (head, _) = path
        .split_once('.')
        .ok_or_else(|| Error::invalid(format!("`{path}` is not a dotted field path")))?;
    let entry = table
        .entry(head.to_string())
        .or_insert_with(|| Value::Table(Table::new()));
    match entry {
        Value::Table(t) => Ok(t),
        _ => Err(Error::invalid(format!("`{head}` is not a table"))),
    }
}

/// Sets `path` (`table.field`) in an experiment table; derived fields are resolved later.
pub(super) fn set_field(table: &mut Table, path: &str, value: Value) -> Result<()> {
    let field = path
        .split_once('.')
        .map(|x| x.1)
        .unwrap_or(path)
        .to_string();
    get_mut_path(table, path)?.insert(field, value);
    Ok(())
}

pub(super) fn get_field<'a>(table: &'a Table, path: &str) -> Option<&'a Value> {
    let (head, field) = path.split_once('.')?;
    table.get(head)?.as_table()?.get(field)
}
