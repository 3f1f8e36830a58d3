//! Where a results store keeps its runs: the names of run directories and the list of the runs
//! `--refine-pstar` added beside the grid's (`refine.json`, written by [`super::refine`]).

use std::path::Path;

use serde_json::Value as Json;

use crate::error::{Error, Result};

/// The file that lists the refinement's runs (beside `manifest.json`).
pub const REFINE_FILE: &str = "refine.json";

/// The directory name of grid run `index` (`runs/run-00012`).
pub fn run_id(index: usize) -> String {
    format!("run-{index:05}")
}

/// The directory name of the `k`-th run the P\* refinement added (`runs/refine-00003`).
pub fn refine_id(k: usize) -> String {
    format!("refine-{k:05}")
}

/// The refined runs listed in `dir/refine.json` (empty when there is none), in the
/// manifest's run format (index, id, point, coordinates, seed).
pub fn listed_runs(dir: &Path) -> Result<Vec<Json>> {
    let path = dir.join(REFINE_FILE);
    if !path.exists() {
        return Ok(Vec::new());
    }
    let text = std::fs::read_to_string(&path)
        .map_err(|e| Error::runtime(format!("cannot read {}: {e}", path.display())))?;
    let v: Json = serde_json::from_str(&text)
        .map_err(|e| Error::invalid(format!("{} is not valid JSON: {e}", path.display())))?;
    Ok(v.get("runs")
        .and_then(Json::as_array)
        .cloned()
        .unwrap_or_default())
}
