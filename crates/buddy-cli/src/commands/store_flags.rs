//! Where `buddy serve` and `buddy replay` take the store's URL from when it carries a
//! password: `--store` works but is warned about (the command line is public to every
//! local user), `$BUDDY_STORE` and `--store-file FILE` keep it out of sight.

use std::path::Path;

use anyhow::Context;
use buddy_store::StoreLocation;

/// Said when `--store` carries a password on the command line.
const ON_THE_COMMAND_LINE: &str = "buddy: WARNING: --store puts the database password on the command line, where every \
     local user and every program buddy starts can read it (ps, /proc/<pid>/cmdline); give \
     the URL with $BUDDY_STORE or --store-file FILE instead";

/// Warns when `url`, given on the command line, carries a password.
pub fn warn_if_password_shown(url: &str) {
    if StoreLocation::parse(url).is_ok_and(|l| l.names_password()) {
        eprintln!("{ON_THE_COMMAND_LINE}");
    }
}

/// The store URL in `file`: its first line that is neither blank nor a `#` comment. A
/// file others may read is used, with a warning.
pub fn store_from_file(file: &Path) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("--store-file {}: cannot read it", file.display()))?;
    if let Some(mode) = buddy_files::open_to_others(file) {
        eprintln!(
            "buddy: warning: --store-file {}: other users may read it (mode {mode:o}); chmod 600 it",
            file.display()
        );
    }
    text.lines()
        .map(str::trim)
        .find(|line| !line.is_empty() && !line.starts_with('#'))
        .map(str::to_owned)
        .with_context(|| {
            format!(
                "--store-file {}: no store URL in it (one line, e.g. postgres://user:password@host/db)",
                file.display()
            )
        })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn the_first_line_of_the_file_is_the_url() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("store");
        std::fs::write(&file, "# the store\n\n  postgres://u:p@h/db  \nignored\n").unwrap();
        assert_eq!(store_from_file(&file).unwrap(), "postgres://u:p@h/db");
        std::fs::write(&file, "# nothing\n").unwrap();
        let error = store_from_file(&file).unwrap_err().to_string();
        assert!(error.contains("no store URL"), "{error}");
        assert!(store_from_file(&dir.path().join("missing")).is_err());
    }
}
