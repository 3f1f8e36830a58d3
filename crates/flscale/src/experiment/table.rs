//! The aggregate tables of a results store (`results`, `chains`, `histograms`) and their two
//! file formats (spec 03 "Results store": "Parquet preferred; CSV as an option").
//!
//! A [`Table`] is a list of named, typed columns: text, 64-bit integers (required, or optional
//! for integer coordinates and seeds), optional booleans, or optional doubles (a missing or
//! non-finite value is `None`: an empty CSV cell, a Parquet null, never `NaN`).
//! The Parquet file is written with the `parquet` crate's low-level column writer (no Arrow):
//! one row group, plain/dictionary encodings, no compression, and a fixed `created_by`, so
//! the same table always gives the same bytes — which the store's resume and merge
//! guarantees rely on. The reader accepts any flat Parquet file of those physical types.

use std::path::Path;
use std::sync::Arc;

use parquet::basic::{LogicalType, Repetition, Type as PhysicalType};
use parquet::column::writer::ColumnWriter;
use parquet::data_type::ByteArray;
use parquet::file::properties::WriterProperties;
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::file::writer::SerializedFileWriter;
use parquet::record::Field;
use parquet::schema::types::Type as SchemaType;
use serde::Serialize;

use super::io::num;
use crate::error::{Error, Result};

/// Which file format the aggregate tables of a results store are written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ResultsFormat {
    /// `results.parquet` etc. (the default; pandas.read_parquet, polars.read_parquet).
    #[default]
    Parquet,
    /// `results.csv` etc. (pandas.read_csv, polars.read_csv).
    Csv,
}

impl ResultsFormat {
    /// Both formats, the default first.
    pub const ALL: [ResultsFormat; 2] = [ResultsFormat::Parquet, ResultsFormat::Csv];

    /// The file extension (`parquet`, `csv`).
    pub fn ext(self) -> &'static str {
        match self {
            ResultsFormat::Parquet => "parquet",
            ResultsFormat::Csv => "csv",
        }
    }
}

impl std::str::FromStr for ResultsFormat {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "parquet" => Ok(ResultsFormat::Parquet),
            "csv" => Ok(ResultsFormat::Csv),
            _ => Err(Error::invalid(format!(
                "results format `{s}` is not allowed; use parquet or csv"
            ))),
        }
    }
}

impl std::fmt::Display for ResultsFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.ext())
    }
}

/// One column's values.
#[derive(Debug, Clone, PartialEq)]
pub enum Column {
    /// UTF-8 text (run ids, observable names, chain status).
    Text(Vec<String>),
    /// Whole numbers (grid index, chain index, histogram counts).
    Int(Vec<i64>),
    /// Whole numbers that may be missing (integer coordinates such as d, p, n1, seed; the
    /// seeds of the two starts).
    OptInt(Vec<Option<i64>>),
    /// Verdicts that may be missing (`starts_agree`, `equilibrated`).
    Bool(Vec<Option<bool>>),
    /// Measured or derived numbers; `None` is a missing value.
    Float(Vec<Option<f64>>),
}

impl Column {
    /// Number of rows.
    pub fn len(&self) -> usize {
        match self {
            Column::Text(v) => v.len(),
            Column::Int(v) => v.len(),
            Column::OptInt(v) => v.len(),
            Column::Bool(v) => v.len(),
            Column::Float(v) => v.len(),
        }
    }

    /// True when the column has no rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn cell(&self, row: usize) -> String {
        match self {
            Column::Text(v) => v[row].clone(),
            Column::Int(v) => v[row].to_string(),
            Column::OptInt(v) => v[row].map(|x| x.to_string()).unwrap_or_default(),
            Column::Bool(v) => v[row].map(|b| b.to_string()).unwrap_or_default(),
            Column::Float(v) => num(v[row]),
        }
    }

    /// Numbers that are whole by definition (coordinates, seeds) as [`Column::OptInt`];
    /// [`Column::Float`] when one of them is not whole or lies beyond ±2⁵³ (where a double
    /// stops telling whole numbers apart, so the value may already be rounded).
    pub fn whole(values: Vec<Option<f64>>) -> Column {
        const EXACT: f64 = 9_007_199_254_740_992.0;
        if values
            .iter()
            .flatten()
            .all(|x| x.fract() == 0.0 && x.abs() <= EXACT)
        {
            Column::OptInt(values.iter().map(|x| x.map(|x| x as i64)).collect())
        } else {
            Column::Float(values)
        }
    }

    /// The rows where `keep` is true (`keep` has one entry per row).
    pub fn select(&self, keep: &[bool]) -> Column {
        fn pick<T: Clone>(v: &[T], keep: &[bool]) -> Vec<T> {
            v.iter()
                .zip(keep)
                .filter(|(_, k)| **k)
                .map(|(x, _)| x.clone())
                .collect()
        }
        match self {
            Column::Text(v) => Column::Text(pick(v, keep)),
            Column::Int(v) => Column::Int(pick(v, keep)),
            Column::OptInt(v) => Column::OptInt(pick(v, keep)),
            Column::Bool(v) => Column::Bool(pick(v, keep)),
            Column::Float(v) => Column::Float(pick(v, keep)),
        }
    }
}

/// Named columns of equal length.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Table {
    /// Column names, in order.
    pub names: Vec<String>,
    /// The columns, parallel to `names`.
    pub columns: Vec<Column>,
}

/// Columns whose values are text, by name (for reading CSV back with the writer's types).
const TEXT_COLUMNS: [&str; 6] = [
    "run",
    "observable",
    "status",
    "histogram",
    "mu_classifier",
    "warnings",
];
/// Columns whose values are whole numbers, by name.
const INT_COLUMNS: [&str; 3] = ["index", "chain", "count"];
/// Columns whose values are verdicts, by name. Stores written before the verdicts were
/// booleans hold them as `yes`/`no`/empty text; both readers turn that into booleans.
pub const BOOL_COLUMNS: [&str; 2] = ["starts_agree", "equilibrated"];

/// Whether a column of that name holds whole numbers that may be missing: the coordinates
/// that are whole by definition (data size d, sample count p, the widths n1 …, seed, tokens,
/// heads) and the seeds of the two starts. Swept fields with integer values are whole too,
/// which only the manifest tells (`experiment::results::load_results`).
pub fn whole_by_name(name: &str) -> bool {
    matches!(
        name,
        "d" | "p" | "seed" | "tokens" | "heads" | "seed_cold" | "seed_hot"
    ) || name
        .strip_prefix('n')
        .is_some_and(|k| !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()))
}

/// A verdict cell as written now (`true`/`false`) or by older stores (`yes`/`no`); empty is
/// unknown. None for anything else.
fn parse_flag(v: &str) -> Option<Option<bool>> {
    match v {
        "true" | "yes" => Some(Some(true)),
        "false" | "no" => Some(Some(false)),
        "" => Some(None),
        _ => None,
    }
}

/// A verdict column that an older store wrote as `yes`/`no`/empty text, as booleans; any
/// other column unchanged (also a text column with other words, which is not a verdict).
fn legacy_flags(name: &str, column: Column) -> Column {
    match column {
        Column::Text(v) if BOOL_COLUMNS.contains(&name) => {
            match v.iter().map(|x| parse_flag(x)).collect::<Option<Vec<_>>>() {
                Some(flags) => Column::Bool(flags),
                None => Column::Text(v),
            }
        }
        other => other,
    }
}

thread_local! {
    static SILENCE_PANICS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f`, returning a panic inside it as `Err(its message)` instead of unwinding further,
/// and without the panic hook's report on stderr for this thread (other threads' panics are
/// reported as before: the hook installed here defers to the previous one).
fn catch_panic_quietly<R>(f: impl FnOnce() -> R) -> std::result::Result<R, String> {
    static INSTALL: std::sync::Once = std::sync::Once::new();
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !SILENCE_PANICS.with(|s| s.get()) {
                previous(info);
            }
        }));
    });
    SILENCE_PANICS.with(|s| s.set(true));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    SILENCE_PANICS.with(|s| s.set(false));
    result.map_err(|payload| {
        payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".to_string())
    })
}

/// Writing a table failed: a failure of the program (exit code 1).
fn parquet_err(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::runtime(format!("Parquet file {}: {e}", path.display()))
}

/// A table file the user pointed at cannot be read (corrupt, cut short, or not written by
/// flscale): bad input (exit code 2), on one line.
fn unreadable_parquet(path: &Path, e: impl std::fmt::Display) -> Error {
    let what = e.to_string().replace('\n', " ");
    Error::invalid(format!(
        "{} is not a readable Parquet table ({what}); `flscale merge DIR` rebuilds a results directory's tables from its runs",
        path.display()
    ))
}

/// The values present, and the Parquet definition level of every row (1 present, 0 null).
fn present_and_levels<T: Copy>(v: &[Option<T>]) -> (Vec<T>, Vec<i16>) {
    let present = v.iter().flatten().copied().collect();
    let levels = v.iter().map(|x| i16::from(x.is_some())).collect();
    (present, levels)
}

impl Table {
    /// Appends a column. Non-finite floats become `None`.
    pub fn push(&mut self, name: impl Into<String>, column: Column) {
        let column = match column {
            Column::Float(v) => {
                Column::Float(v.into_iter().map(|x| x.filter(|x| x.is_finite())).collect())
            }
            other => other,
        };
        self.names.push(name.into());
        self.columns.push(column);
    }

    /// Number of rows (0 for a table without columns).
    pub fn rows(&self) -> usize {
        self.columns.first().map(Column::len).unwrap_or(0)
    }

    /// The column called `name`.
    pub fn column(&self, name: &str) -> Option<&Column> {
        self.names
            .iter()
            .position(|n| n == name)
            .map(|i| &self.columns[i])
    }

    fn check_shape(&self) -> Result<()> {
        let n = self.rows();
        match self.columns.iter().position(|c| c.len() != n) {
            Some(i) => Err(Error::runtime(format!(
                "column {} has {} rows, the table {n}",
                self.names[i],
                self.columns[i].len()
            ))),
            None => Ok(()),
        }
    }

    /// The table as CSV: a header line, then one line per row; floats in their shortest
    /// round-trip form, missing values as empty cells. Names and text must not contain
    /// commas (the store's never do: ids, observable names, status words).
    pub fn to_csv(&self) -> Result<String> {
        self.check_shape()?;
        let mut s = self.names.join(",");
        s.push('\n');
        for row in 0..self.rows() {
            let cells: Vec<String> = self.columns.iter().map(|c| c.cell(row)).collect();
            s += &cells.join(",");
            s.push('\n');
        }
        Ok(s)
    }

    /// Reads the CSV written by [`Table::to_csv`]; the columns get the types the store wrote
    /// them with, by name (text: run, observable, status …; whole numbers: index, chain,
    /// count, and the coordinates of [`whole_by_name`] when every cell is one; verdicts:
    /// [`BOOL_COLUMNS`], `true`/`false` or an older store's `yes`/`no`; every other column
    /// optional floats). `source` names the file in messages.
    pub fn from_csv(text: &str, source: &str) -> Result<Table> {
        let mut lines = text.lines();
        let header = lines
            .next()
            .ok_or_else(|| Error::invalid(format!("{source} is empty; expected a header line")))?;
        let names: Vec<String> = header.split(',').map(str::to_string).collect();
        let mut cells: Vec<Vec<String>> = vec![Vec::new(); names.len()];
        for (k, line) in lines.enumerate() {
            let f: Vec<&str> = line.split(',').collect();
            if f.len() != names.len() {
                return Err(Error::invalid(format!(
                    "{source} line {} has {} cells, the header {}",
                    k + 2,
                    f.len(),
                    names.len()
                )));
            }
            for (c, v) in cells.iter_mut().zip(f) {
                c.push(v.to_string());
            }
        }
        let mut t = Table::default();
        for (name, col) in names.into_iter().zip(cells) {
            let bad = |v: &str, what: &str| {
                Error::invalid(format!(
                    "{source}: column {name} holds `{v}`, which is not {what}"
                ))
            };
            let column = if TEXT_COLUMNS.contains(&name.as_str()) {
                Column::Text(col)
            } else if BOOL_COLUMNS.contains(&name.as_str()) {
                Column::Bool(
                    col.iter()
                        .map(|v| parse_flag(v).ok_or_else(|| bad(v, "true, false or empty")))
                        .collect::<Result<_>>()?,
                )
            } else if whole_by_name(&name)
                && col.iter().all(|v| v.is_empty() || v.parse::<i64>().is_ok())
            {
                Column::OptInt(col.iter().map(|v| v.parse().ok()).collect())
            } else if INT_COLUMNS.contains(&name.as_str()) {
                Column::Int(
                    col.iter()
                        .map(|v| v.parse().map_err(|_| bad(v, "a whole number")))
                        .collect::<Result<_>>()?,
                )
            } else {
                Column::Float(
                    col.iter()
                        .map(|v| {
                            if v.is_empty() {
                                Ok(None)
                            } else {
                                v.parse().map(Some).map_err(|_| bad(v, "a number"))
                            }
                        })
                        .collect::<Result<_>>()?,
                )
            };
            t.push(name, column);
        }
        Ok(t)
    }

    /// The table as the bytes of a Parquet file: text as required UTF-8 `BYTE_ARRAY`, whole
    /// numbers as required `INT64` (optional `INT64` where they may be missing), verdicts as
    /// optional `BOOLEAN`, floats as optional `DOUBLE` (nulls for missing values).
    pub fn to_parquet(&self) -> Result<Vec<u8>> {
        self.check_shape()?;
        let here = Path::new("(in memory)");
        let err = |e: parquet::errors::ParquetError| parquet_err(here, e);
        let fields = self
            .names
            .iter()
            .zip(&self.columns)
            .map(|(name, c)| {
                let (physical, repetition, logical) = match c {
                    Column::Text(_) => (
                        PhysicalType::BYTE_ARRAY,
                        Repetition::REQUIRED,
                        Some(LogicalType::String),
                    ),
                    Column::Int(_) => (PhysicalType::INT64, Repetition::REQUIRED, None),
                    Column::OptInt(_) => (PhysicalType::INT64, Repetition::OPTIONAL, None),
                    Column::Bool(_) => (PhysicalType::BOOLEAN, Repetition::OPTIONAL, None),
                    Column::Float(_) => (PhysicalType::DOUBLE, Repetition::OPTIONAL, None),
                };
                SchemaType::primitive_type_builder(name, physical)
                    .with_repetition(repetition)
                    .with_logical_type(logical)
                    .build()
                    .map(Arc::new)
            })
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(err)?;
        let schema = SchemaType::group_type_builder("flscale")
            .with_fields(fields)
            .build()
            .map_err(err)?;
        // A fixed writer name: the default one carries the parquet crate's version, which
        // would make the bytes depend on the build rather than on the data.
        let props = WriterProperties::builder()
            .set_created_by("flscale".to_string())
            .build();
        let mut buf = Vec::new();
        let mut writer =
            SerializedFileWriter::new(&mut buf, Arc::new(schema), Arc::new(props)).map_err(err)?;
        let mut rg = writer.next_row_group().map_err(err)?;
        for c in &self.columns {
            let mut col = rg
                .next_column()
                .map_err(err)?
                .ok_or_else(|| Error::runtime("Parquet writer has fewer columns than the table"))?;
            match (col.untyped(), c) {
                (ColumnWriter::ByteArrayColumnWriter(w), Column::Text(v)) => {
                    let values: Vec<ByteArray> =
                        v.iter().map(|s| ByteArray::from(s.as_str())).collect();
                    w.write_batch(&values, None, None).map_err(err)?;
                }
                (ColumnWriter::Int64ColumnWriter(w), Column::Int(v)) => {
                    w.write_batch(v, None, None).map_err(err)?;
                }
                (ColumnWriter::Int64ColumnWriter(w), Column::OptInt(v)) => {
                    let (present, levels) = present_and_levels(v);
                    w.write_batch(&present, Some(&levels), None).map_err(err)?;
                }
                (ColumnWriter::BoolColumnWriter(w), Column::Bool(v)) => {
                    let (present, levels) = present_and_levels(v);
                    w.write_batch(&present, Some(&levels), None).map_err(err)?;
                }
                (ColumnWriter::DoubleColumnWriter(w), Column::Float(v)) => {
                    let (present, levels) = present_and_levels(v);
                    w.write_batch(&present, Some(&levels), None).map_err(err)?;
                }
                _ => {
                    return Err(Error::runtime(
                        "Parquet column type differs from the table's",
                    ))
                }
            }
            col.close().map_err(err)?;
        }
        rg.close().map_err(err)?;
        writer.close().map_err(err)?;
        Ok(buf)
    }

    /// Reads a flat Parquet file: string columns as text, integer columns as whole numbers
    /// (optional ones as [`Column::OptInt`]), boolean columns as verdicts, floating-point
    /// columns as optional floats; an older store's `yes`/`no` verdicts as booleans.
    pub fn read_parquet(path: &Path) -> Result<Table> {
        // The parquet crate (57.x) still panics on some corrupt files (an `unwrap` in its
        // row-group metadata decoder, found by the fuzz test below; upstream apache/arrow-rs
        // #9705 and #9992 are the same class); a damaged file is bad input, not a crash.
        match catch_panic_quietly(|| Table::read_parquet_unguarded(path)) {
            Ok(result) => result,
            Err(panic) => Err(unreadable_parquet(path, format!("decoder failed: {panic}"))),
        }
    }

    fn read_parquet_unguarded(path: &Path) -> Result<Table> {
        let file = std::fs::File::open(path)
            .map_err(|e| Error::invalid(format!("cannot read {}: {e}", path.display())))?;
        let reader = SerializedFileReader::new(file).map_err(|e| unreadable_parquet(path, e))?;
        let schema = reader.metadata().file_metadata().schema_descr_ptr();
        let mut table = Table::default();
        for col in schema.columns() {
            let column = match col.physical_type() {
                PhysicalType::BYTE_ARRAY | PhysicalType::FIXED_LEN_BYTE_ARRAY => {
                    Column::Text(Vec::new())
                }
                PhysicalType::INT32 | PhysicalType::INT64 if !col.self_type().is_optional() => {
                    Column::Int(Vec::new())
                }
                PhysicalType::INT32 | PhysicalType::INT64 => Column::OptInt(Vec::new()),
                PhysicalType::BOOLEAN => Column::Bool(Vec::new()),
                _ => Column::Float(Vec::new()),
            };
            table.names.push(col.name().to_string());
            table.columns.push(column);
        }
        let rows = reader
            .get_row_iter(None)
            .map_err(|e| unreadable_parquet(path, e))?;
        for row in rows {
            let row = row.map_err(|e| unreadable_parquet(path, e))?;
            for (k, (_, field)) in row.get_column_iter().enumerate() {
                let Some(col) = table.columns.get_mut(k) else {
                    return Err(unreadable_parquet(
                        path,
                        "a row has more fields than the schema",
                    ));
                };
                let bad = || unreadable_parquet(path, format!("column {k} holds {field}"));
                match (col, field) {
                    (Column::Text(v), Field::Str(s)) => v.push(s.clone()),
                    (Column::Int(v), Field::Long(x)) => v.push(*x),
                    (Column::Int(v), Field::Int(x)) => v.push(i64::from(*x)),
                    (Column::OptInt(v), Field::Null) => v.push(None),
                    (Column::OptInt(v), Field::Long(x)) => v.push(Some(*x)),
                    (Column::OptInt(v), Field::Int(x)) => v.push(Some(i64::from(*x))),
                    (Column::Bool(v), Field::Null) => v.push(None),
                    (Column::Bool(v), Field::Bool(b)) => v.push(Some(*b)),
                    (Column::Float(v), Field::Null) => v.push(None),
                    (Column::Float(v), Field::Double(x)) => v.push(Some(*x)),
                    (Column::Float(v), Field::Float(x)) => v.push(Some(f64::from(*x))),
                    (Column::Float(v), Field::Long(x)) => v.push(Some(*x as f64)),
                    (Column::Float(v), Field::Int(x)) => v.push(Some(f64::from(*x))),
                    _ => return Err(bad()),
                }
            }
        }
        table.check_shape()?;
        let Table { names, columns } = table;
        let columns = names
            .iter()
            .zip(columns)
            .map(|(n, c)| legacy_flags(n, c))
            .collect();
        Ok(Table { names, columns })
    }

    /// Reads `path` as Parquet or CSV, by its extension.
    pub fn read(path: &Path) -> Result<Table> {
        match path.extension().and_then(|e| e.to_str()) {
            Some("parquet") => Table::read_parquet(path),
            Some("csv") => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| Error::invalid(format!("cannot read {}: {e}", path.display())))?;
                Table::from_csv(&text, &path.display().to_string())
            }
            _ => Err(Error::invalid(format!(
                "{} is neither .parquet nor .csv",
                path.display()
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Table {
        let mut t = Table::default();
        t.push(
            "run",
            Column::Text(vec![
                "run-00000".into(),
                "run-00001".into(),
                "run-00001".into(),
            ]),
        );
        t.push("index", Column::Int(vec![0, 1, 1]));
        t.push("d", Column::OptInt(vec![Some(8), Some(12), None]));
        t.push(
            "kappa",
            Column::Float(vec![Some(0.5), Some(1.0), Some(1.0)]),
        );
        t.push(
            "observable",
            Column::Text(vec![
                "alignment".into(),
                "alignment".into(),
                "test_mse".into(),
            ]),
        );
        t.push(
            "value",
            Column::Float(vec![Some(0.1 + 0.2), Some(-1e-300), Some(f64::NAN)]),
        );
        t.push("err", Column::Float(vec![None, Some(1.0 / 3.0), None]));
        t.push(
            "equilibrated",
            Column::Bool(vec![Some(true), Some(false), None]),
        );
        t
    }

    #[test]
    fn parquet_round_trip_keeps_every_value_and_nan_becomes_null() {
        let t = sample();
        assert_eq!(
            t.column("value"),
            Some(&Column::Float(vec![Some(0.1 + 0.2), Some(-1e-300), None]))
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.parquet");
        let bytes = t.to_parquet().unwrap();
        assert_eq!(&bytes[..4], b"PAR1");
        assert_eq!(&bytes[bytes.len() - 4..], b"PAR1");
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(Table::read(&path).unwrap(), t);
        // Same table, same bytes.
        assert_eq!(t.to_parquet().unwrap(), bytes);
    }

    #[test]
    fn csv_round_trip_matches_the_parquet_one() {
        let t = sample();
        let csv = t.to_csv().unwrap();
        // Whole numbers as `12`, doubles that happen to be whole as `1` too (the column's
        // name says which), verdicts as true/false, missing values empty.
        assert_eq!(
            csv.lines().nth(1),
            Some("run-00000,0,8,0.5,alignment,0.30000000000000004,,true"),
            "{csv}"
        );
        assert!(
            csv.lines()
                .nth(2)
                .unwrap()
                .ends_with(",0.3333333333333333,false"),
            "{csv}"
        );
        assert_eq!(
            csv.lines().nth(3),
            Some("run-00001,1,,1,test_mse,,,"),
            "{csv}"
        );
        assert_eq!(Table::from_csv(&csv, "t.csv").unwrap(), t);
        let e = Table::from_csv("run,index\nrun-0,x\n", "t.csv").unwrap_err();
        assert!(e.to_string().contains("column index holds `x`"), "{e}");
        let e = Table::from_csv("run,equilibrated\nrun-0,maybe\n", "t.csv").unwrap_err();
        assert!(
            e.to_string()
                .contains("holds `maybe`, which is not true, false or empty"),
            "{e}"
        );
        assert!(ResultsFormat::ALL.contains(&"CSV".parse().unwrap()));
        let e = "feather".parse::<ResultsFormat>().unwrap_err();
        assert!(e.to_string().contains("parquet or csv"), "{e}");
    }

    #[test]
    fn empty_tables_round_trip() {
        let mut t = Table::default();
        t.push("run", Column::Text(vec![]));
        t.push("value", Column::Float(vec![]));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("e.parquet");
        std::fs::write(&path, t.to_parquet().unwrap()).unwrap();
        assert_eq!(Table::read(&path).unwrap(), t);
    }

    /// A read failure must be bad input (exit code 2) on one line; anything else is a bug.
    fn check_rejection(result: Result<Table>) {
        if let Err(e) = result {
            assert_eq!(e.exit_code(), 2, "{e}");
            assert!(!e.to_string().contains('\n'), "{e}");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]
        /// Arbitrary text, and the store's own CSV with a cell replaced or the text cut short,
        /// never panic the CSV reader.
        #[test]
        fn csv_reader_rejects_garbage_cleanly(
            text in "\\PC{0,300}", cut in 0usize..400, cell in 0usize..40,
            value in proptest::prop_oneof![
                proptest::strategy::Just(""), proptest::strategy::Just("x"), proptest::strategy::Just("nan"),
                proptest::strategy::Just("1e999"), proptest::strategy::Just("-0"),
                proptest::strategy::Just("99999999999999999999"), proptest::strategy::Just("1,2"),
            ],
        ) {
            check_rejection(Table::from_csv(&text, "fuzz.csv"));
            let csv = sample().to_csv().unwrap();
            let end = cut.min(csv.len());
            check_rejection(Table::from_csv(&csv[..end], "fuzz.csv"));
            let mut k = 0;
            let replaced: String = csv
                .split_inclusive([',', '\n'])
                .map(|piece| {
                    k += 1;
                    if k - 1 == cell {
                        let sep = if piece.ends_with('\n') { "\n" } else if piece.ends_with(',') { "," } else { "" };
                        format!("{value}{sep}")
                    } else {
                        piece.to_string()
                    }
                })
                .collect();
            check_rejection(Table::from_csv(&replaced, "fuzz.csv"));
        }

        /// A Parquet file with bytes overwritten or cut short is rejected as bad input, never a
        /// panic (the parquet crate's decoders see whatever the user points `fit`/`plot` at).
        #[test]
        fn parquet_reader_rejects_corrupt_files_cleanly(
            positions in proptest::collection::vec(0usize..4096, 1..4), byte: u8, cut in 0usize..4096,
        ) {
            let bytes = sample().to_parquet().unwrap();
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("fuzz.parquet");
            let mut corrupt = bytes.clone();
            for &p in &positions {
                let p = p % corrupt.len();
                corrupt[p] ^= byte | 1;
            }
            std::fs::write(&path, &corrupt).unwrap();
            check_rejection(Table::read_parquet(&path));
            std::fs::write(&path, &bytes[..cut.min(bytes.len())]).unwrap();
            check_rejection(Table::read_parquet(&path));
        }
    }
}
