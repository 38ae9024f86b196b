//! Where scenarios come from: the ones built into the binary, or a directory of JSON
//! files (which adds its own and replaces built-ins of the same name).

use std::path::{Path, PathBuf};

use crate::scenario::{Scenario, ScenarioError};

include!(concat!(env!("OUT_DIR"), "/builtin_scenarios.rs"));

/// The built-in offline scenario `buddy run` and `buddy chat` use without `--scenario`.
pub const DEFAULT_SCENARIO: &str = include_str!("../../../scenarios/offline_assistant.json");

/// Scenarios could not be listed or read.
#[derive(Debug, thiserror::Error)]
pub enum LibraryError {
    #[error("cannot list scenarios in `{path}`: {source}")]
    List {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    #[error("no scenario files (*.json) in {0}")]
    Empty(String),
    /// `--scenario` named neither a file nor a built-in scenario.
    #[error(
        "no scenario file `{given}` and no built-in scenario of that name; give a path to a scenario file or one of: {}",
        names.join(", ")
    )]
    NotFound { given: String, names: Vec<String> },
}

/// The default scenario (`offline_assistant`), parsed.
pub fn default_scenario() -> Result<Scenario, ScenarioError> {
    Scenario::parse(DEFAULT_SCENARIO, "built-in offline_assistant")
}

/// Every scenario built into the binary, in file-name order.
pub fn builtin() -> Result<Vec<Scenario>, ScenarioError> {
    BUILTIN_SCENARIOS
        .iter()
        .map(|(file, text)| Scenario::parse(text, &format!("built-in {file}")))
        .collect()
}

/// The scenario `given` names: the file at that path when there is one, else, for a
/// bare name (`ab_cycle` or `ab_cycle.json`, no directory), the built-in scenario of
/// that name. A path with a directory is always a file.
pub fn find(given: &Path) -> Result<Scenario, LibraryError> {
    let bare = given.parent().is_none_or(|p| p.as_os_str().is_empty());
    if given.exists() || !bare {
        return Ok(Scenario::load(given)?);
    }
    let wanted = given
        .to_str()
        .map(|name| name.strip_suffix(".json").unwrap_or(name));
    let all = builtin()?;
    if let Some(scenario) = all.iter().find(|s| Some(s.name.as_str()) == wanted) {
        return Ok(scenario.clone());
    }
    Err(LibraryError::NotFound {
        given: given.display().to_string(),
        names: all.into_iter().map(|s| s.name).collect(),
    })
}

/// The scenario files in `dir`, sorted by name.
pub fn scenario_files(dir: &Path) -> Result<Vec<PathBuf>, LibraryError> {
    let read = std::fs::read_dir(dir).map_err(|source| LibraryError::List {
        path: dir.display().to_string(),
        source,
    })?;
    let mut files: Vec<PathBuf> = read
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    Ok(files)
}

/// Every scenario of `dir`, in file-name order; a directory without any is an error.
pub fn load_dir(dir: &Path) -> Result<Vec<Scenario>, LibraryError> {
    let scenarios = scenario_files(dir)?
        .iter()
        .map(|file| Scenario::load(file))
        .collect::<Result<Vec<_>, _>>()?;
    if scenarios.is_empty() {
        return Err(LibraryError::Empty(dir.display().to_string()));
    }
    Ok(scenarios)
}

/// The scenarios a command works on: those of `dir` when one is given, else of
/// `./scenarios` when it exists, else the built-in ones. Returns where they came from too.
pub fn load(dir: Option<&Path>) -> Result<(Vec<Scenario>, String), LibraryError> {
    let local = Path::new("scenarios");
    match dir {
        Some(dir) => Ok((load_dir(dir)?, dir.display().to_string())),
        None if local.is_dir() => Ok((load_dir(local)?, "./scenarios".to_owned())),
        None => Ok((builtin()?, "the built-in scenarios".to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_scenario_parses_and_the_default_is_among_them() {
        let all = builtin().expect("built-in scenarios parse");
        assert!(all.len() > 30, "{}", all.len());
        let default = default_scenario().expect("default parses");
        assert!(all.iter().any(|s| s.name == default.name));
    }

    #[test]
    fn a_scenario_is_found_by_file_or_by_built_in_name() {
        let file = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/polling.json");
        assert_eq!(find(Path::new(file)).expect("a file").name, "polling");
        for name in ["ab_cycle", "ab_cycle.json"] {
            assert_eq!(find(Path::new(name)).expect(name).name, "ab_cycle");
        }
        // A path with a directory is a file, never a built-in name.
        let error = find(Path::new("elsewhere/ab_cycle.json")).expect_err("no such file");
        assert!(
            matches!(error, LibraryError::Scenario(ScenarioError::Read { .. })),
            "{error}"
        );
        let error = find(Path::new("ab_cycel")).expect_err("a typo").to_string();
        assert!(
            error.contains("`ab_cycel`")
                && error.contains("ab_cycle, ")
                && error.contains("plain_chat"),
            "{error}"
        );
    }

    #[test]
    fn a_directory_without_scenarios_is_an_error_that_names_it() {
        let missing = Path::new("/nonexistent-buddy-scenarios");
        let error = load_dir(missing).expect_err("missing");
        assert!(
            error.to_string().contains("nonexistent-buddy-scenarios"),
            "{error}"
        );
    }
}
