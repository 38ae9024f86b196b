//! The shape of the server settings table: what each setting declares once (its
//! `[server]` name, default, the values it accepts, its `buddy serve` flag, its doc) and
//! the macro that turns the table into [`ServerSettings`](super::ServerSettings) and
//! [`SERVER_FIELDS`](super::SERVER_FIELDS).

use std::path::PathBuf;
use std::time::Duration;

use buddy_core::Usd;
use serde::{Deserialize, Deserializer};

use super::SkillCalls;
use super::keys::KeyConfig;

/// One setting of the `[server]` table, as the table declares it.
#[derive(Clone, Copy, Debug)]
pub struct SettingField {
    /// Its name in `[server]`.
    pub name: &'static str,
    /// The setting's doc comment, one line per `///` line.
    pub doc: &'static str,
    pub check: SettingCheck,
    pub flag: SettingFlag,
}

impl SettingField {
    /// The first line of the setting's doc comment.
    pub fn summary(&self) -> &'static str {
        self.doc.lines().next().unwrap_or_default().trim()
    }
}

/// Which values a setting accepts beyond its type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SettingCheck {
    /// Any value of its type.
    Any,
    /// A number of at least this.
    AtLeast(u64),
}

/// How `buddy serve` sets a setting on its command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SettingFlag {
    /// Only in buddy.toml.
    None,
    /// `--long VALUE` (and the environment variable `env`, when named).
    Value {
        long: &'static str,
        value_name: &'static str,
        env: Option<&'static str>,
        help: &'static str,
    },
}

/// A setting's value was wrong: which one, and what it takes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("[server] {name}: {message}")]
pub struct SettingError {
    pub name: String,
    pub message: String,
}

/// A type a setting may have: read from buddy.toml, parsed from a flag, and seen as a
/// number by its check.
pub trait Setting: Sized {
    /// The value as buddy.toml writes it.
    fn read<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error>;
    /// The value as a flag (or its environment variable) writes it.
    fn parse(text: &str) -> Result<Self, String>;
    /// The value as a number, for its check (`None`: not a number).
    fn number(&self) -> Option<u64> {
        None
    }
}

/// A setting type read as serde reads it and parsed with `FromStr`; `$what` names what
/// a flag must hold, `$number` how its check sees it.
macro_rules! parsed_setting {
    ($ty:ty, $what:literal, $number:expr) => {
        impl Setting for $ty {
            fn read<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                <$ty>::deserialize(deserializer)
            }
            fn parse(text: &str) -> Result<Self, String> {
                text.trim()
                    .parse()
                    .map_err(|_| format!("expected {}, got `{text}`", $what))
            }
            fn number(&self) -> Option<u64> {
                $number(self)
            }
        }
    };
}

parsed_setting!(usize, "a whole number", |n: &usize| u64::try_from(*n).ok());
parsed_setting!(bool, "true or false", |_: &bool| None);

/// A setting type read as serde reads it whose flag is taken as written.
macro_rules! text_setting {
    ($ty:ty, $from:expr) => {
        impl Setting for $ty {
            fn read<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                <$ty>::deserialize(deserializer)
            }
            fn parse(text: &str) -> Result<Self, String> {
                Ok($from(text))
            }
        }
    };
}

text_setting!(String, str::to_owned);
text_setting!(PathBuf, PathBuf::from);
text_setting!(Option<String>, |text: &str| Some(text.to_owned()));

impl Setting for Option<Usd> {
    fn read<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Option::<Usd>::deserialize(deserializer)
    }
    fn parse(text: &str) -> Result<Self, String> {
        let dollars: f64 = text
            .trim()
            .parse()
            .map_err(|_| format!("expected an amount of dollars, got `{text}`"))?;
        Usd::from_dollars(dollars)
            .map(Some)
            .ok_or_else(|| format!("{dollars} is not an amount of dollars (a number ≥ 0)"))
    }
}

impl Setting for SkillCalls {
    fn read<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        SkillCalls::deserialize(deserializer)
    }
    fn parse(text: &str) -> Result<Self, String> {
        serde_json::from_value(serde_json::Value::String(text.trim().to_owned()))
            .map_err(|_| format!("expected mcp_call or buddy:skill_call, got `{text}`"))
    }
}

impl Setting for Vec<KeyConfig> {
    fn read<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Vec::<KeyConfig>::deserialize(deserializer)
    }
    fn parse(_: &str) -> Result<Self, String> {
        Err("keys are declared in buddy.toml ([[server.keys]])".into())
    }
}

/// A list of words (`cors_origins`): an array in buddy.toml, comma-separated as a flag.
impl Setting for Vec<String> {
    fn read<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Vec::<String>::deserialize(deserializer)
    }
    fn parse(text: &str) -> Result<Self, String> {
        Ok(text
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect())
    }
}

/// A duration is written as a number of seconds (`*_secs`).
impl Setting for Duration {
    fn read<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let secs = f64::deserialize(deserializer)?;
        seconds(secs).map_err(serde::de::Error::custom)
    }
    fn parse(text: &str) -> Result<Self, String> {
        let secs: f64 = text
            .trim()
            .parse()
            .map_err(|_| format!("expected a number of seconds, got `{text}`"))?;
        seconds(secs)
    }
}

fn seconds(secs: f64) -> Result<Duration, String> {
    Duration::try_from_secs_f64(secs)
        .map_err(|_| format!("{secs} is not a number of seconds (give one ≥ 0, such as 30 or 0.5)"))
}

impl SettingCheck {
    /// Whether `value` of setting `name` passes; the error says what it takes.
    pub(crate) fn holds(self, name: &str, value: Option<u64>) -> Result<(), SettingError> {
        match (self, value) {
            (SettingCheck::AtLeast(lo), Some(n)) if n < lo => Err(SettingError {
                name: name.to_owned(),
                message: format!("{n} is too small; give at least {lo}"),
            }),
            _ => Ok(()),
        }
    }
}

/// Declares the settings table: each setting once, with its doc, `[server]` name, type,
/// default, check and flag; then the settings that come from elsewhere (other sections
/// of buddy.toml, the environment), which are not read from `[server]`.
macro_rules! server_settings {
    (
        table {
            $(
                $(#[doc = $doc:literal])*
                $field:ident as $name:literal : $ty:ty = $default:expr;
                    check $check:expr;
                    flag $flag:expr;
            )*
        }
        elsewhere {
            $(
                $(#[doc = $odoc:literal])*
                $other:ident : $oty:ty = $odefault:expr;
            )*
        }
    ) => {
        /// A server's settings: the `[server]` table of buddy.toml (each setting declared
        /// once in the settings table), and what other sections and the environment add.
        #[derive(Clone, Debug, serde::Deserialize)]
        #[serde(deny_unknown_fields, default)]
        pub struct ServerSettings {
            $(
                $(#[doc = $doc])*
                #[serde(rename = $name, deserialize_with = "Setting::read")]
                pub $field: $ty,
            )*
            $(
                $(#[doc = $odoc])*
                #[serde(skip)]
                pub $other: $oty,
            )*
        }

        impl Default for ServerSettings {
            fn default() -> Self {
                ServerSettings {
                    $($field: $default,)*
                    $($other: $odefault,)*
                }
            }
        }

        /// Every setting of the `[server]` table, in the table's order.
        pub const SERVER_FIELDS: &[SettingField] = &[
            $(SettingField {
                name: $name,
                doc: concat!($($doc, "\n"),*),
                check: $check,
                flag: $flag,
            },)*
        ];

        impl ServerSettings {
            /// Checks every setting against what it accepts.
            pub fn check(&self) -> Result<(), SettingError> {
                $($check.holds($name, Setting::number(&self.$field))?;)*
                Ok(())
            }

            /// Sets `[server]` setting `name` from a flag's (or environment variable's) text.
            pub fn set(&mut self, name: &str, text: &str) -> Result<(), SettingError> {
                let wrong = |message: String| SettingError { name: name.to_owned(), message };
                match name {
                    $($name => self.$field = Setting::parse(text).map_err(wrong)?,)*
                    _ => return Err(wrong("no such setting".into())),
                }
                self.check()
            }
        }
    };
}

pub(crate) use server_settings;
