//! `buddy serve`'s flags for `[server]` settings, made from the server's settings table
//! (`buddy_server::SERVER_FIELDS`): a setting with a flag there has it here, checked as
//! the table checks it.

use buddy_server::{SERVER_FIELDS, ServerSettings, SettingFlag};

/// The `[server]` settings given on the command line (or their environment variables),
/// applied over buddy.toml's.
#[derive(Debug, Default, Clone)]
pub struct ServerFlags {
    /// (setting, text as given) for each flag that was set, in table order.
    set: Vec<(&'static str, String)>,
    /// The settings given on the command line itself (not by their environment variable).
    on_command_line: Vec<&'static str>,
}

impl ServerFlags {
    /// `settings` with every flag given applied.
    pub fn apply(&self, settings: &mut ServerSettings) -> Result<(), buddy_server::SettingError> {
        for (name, text) in &self.set {
            settings.set(name, text)?;
        }
        Ok(())
    }

    /// The text of setting `name` when it was given on the command line, where every
    /// local user can read it (`None` when it came from its environment variable).
    pub fn on_command_line(&self, name: &str) -> Option<&str> {
        self.on_command_line.iter().find(|n| **n == name)?;
        self.set
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, text)| text.as_str())
    }
}

impl clap::FromArgMatches for ServerFlags {
    fn from_arg_matches(matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let mut flags = ServerFlags::default();
        flags.update_from_arg_matches(matches)?;
        Ok(flags)
    }

    fn update_from_arg_matches(&mut self, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
        let flagged = SERVER_FIELDS
            .iter()
            .filter(|f| matches!(f.flag, SettingFlag::Value { .. }));
        for field in flagged {
            if let Some(text) = matches.get_one::<String>(field.name) {
                self.set.retain(|(name, _)| *name != field.name);
                self.set.push((field.name, text.clone()));
                self.on_command_line.retain(|name| *name != field.name);
                if matches.value_source(field.name) == Some(clap::parser::ValueSource::CommandLine)
                {
                    self.on_command_line.push(field.name);
                }
            }
        }
        Ok(())
    }
}

impl clap::Args for ServerFlags {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        let mut cmd = cmd;
        for field in SERVER_FIELDS {
            let SettingFlag::Value {
                long,
                value_name,
                env,
                help,
            } = field.flag
            else {
                continue;
            };
            let name = field.name;
            // Checked as buddy.toml's value is, so a wrong one is a usage error naming it.
            let check = move |text: &str| {
                let mut probe = ServerSettings::default();
                probe
                    .set(name, text)
                    .map(|()| text.to_owned())
                    .map_err(|e| e.message)
            };
            let arg = clap::Arg::new(name)
                .long(long)
                .value_name(value_name)
                .help(help)
                .value_parser(check);
            cmd = cmd.arg(match env {
                Some(env) => arg.env(env),
                None => arg,
            });
        }
        cmd
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

#[cfg(test)]
mod tests {
    use clap::{Args, FromArgMatches};

    use super::*;

    fn parse(args: &[&str]) -> Result<ServerFlags, clap::Error> {
        let cmd = ServerFlags::augment_args(clap::Command::new("serve").no_binary_name(true));
        let matches = cmd.try_get_matches_from(args)?;
        ServerFlags::from_arg_matches(&matches)
    }

    #[test]
    fn the_table_flags_set_their_settings_and_a_wrong_value_is_refused() {
        let flags = parse(&[
            "--max-concurrent-turns",
            "3",
            "--shutdown-grace-secs",
            "1.5",
        ])
        .unwrap();
        let mut settings = ServerSettings::default();
        flags.apply(&mut settings).unwrap();
        assert_eq!(settings.max_concurrent_turns_per_key, 3);
        assert_eq!(
            settings.shutdown_grace,
            std::time::Duration::from_millis(1500)
        );
        assert_eq!(
            flags.on_command_line("max_concurrent_turns_per_key"),
            Some("3")
        );
        assert_eq!(flags.on_command_line("store"), None);
        let wrong = parse(&["--max-body-bytes", "lots"]).unwrap_err();
        assert!(wrong.to_string().contains("whole number"), "{wrong}");
        assert!(
            parse(&["--header-timeout-secs", "3"]).is_err(),
            "only flagged settings are flags"
        );
    }
}
