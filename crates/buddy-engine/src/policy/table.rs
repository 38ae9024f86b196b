//! The shape of the policy table: what each field declares once (default, valid range,
//! ceiling rule, command-line flag) and the macro that turns the table into
//! [`LoopPolicy`](super::LoopPolicy) and [`POLICY_FIELDS`](super::POLICY_FIELDS).

use super::{OnLimit, UnattendedElicitation};

/// One field of the policy, as the table declares it.
#[derive(Clone, Copy)]
pub struct Field {
    pub name: &'static str,
    /// The field's doc comment, one line per `///` line.
    pub doc: &'static str,
    pub check: Check,
    pub ceiling: Ceiling,
    pub flag: Flag,
    /// The value as a number (bools and `on_limit` as 0/1), `None` when off or unlimited.
    pub(crate) number: fn(&super::LoopPolicy) -> Option<u64>,
    /// The value as a person reads it: `25`, `off`, `finalize`.
    pub(crate) words: fn(&super::LoopPolicy) -> String,
    /// Turns `Some(0)` (0 or null in a patch) into off.
    pub(crate) normalize: fn(&mut super::LoopPolicy),
    /// How a request writes the value whose `number` is given (dollars for an amount).
    pub json: fn(u64) -> serde_json::Value,
}

impl std::fmt::Debug for Field {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Field")
            .field("name", &self.name)
            .field("check", &self.check)
            .field("ceiling", &self.ceiling)
            .finish()
    }
}

impl Field {
    /// The first line of the field's doc comment.
    pub fn summary(&self) -> &'static str {
        self.doc.lines().next().unwrap_or_default().trim()
    }

    /// The field's value in `policy`, as a person reads it.
    pub fn value_words(&self, policy: &super::LoopPolicy) -> String {
        (self.words)(policy)
    }

    /// The field's value in `policy` as a number; `None` when off or unlimited.
    pub fn value_number(&self, policy: &super::LoopPolicy) -> Option<u64> {
        (self.number)(policy)
    }
}

/// Which values a field accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    /// Any value of its type.
    Any,
    /// A number within `lo..=hi` (an optional field may also be off).
    Range {
        lo: u64,
        hi: u64,
        expected: &'static str,
    },
}

/// How a request's value compares with the operator's: what "loosen" means for the
/// field. A request may only tighten.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ceiling {
    /// Lower is tighter; off (unlimited) is the loosest.
    AtMost,
    /// Higher is tighter (a switch whose `true` ends turns sooner).
    AtLeast,
    /// The model's context window as the turn uses it (the policy's, else buddy's table):
    /// a request may only shrink it.
    Window,
    /// The reserve kept for the reply: a request may change it only so far as the room
    /// left for the request (window less reserve) does not grow.
    Reserve,
    /// Loop detection: a request may switch it off only where the operator allows that.
    LoopDetection,
    /// Changes what the model is told or offered, not what a turn may spend.
    Free,
}

/// The command-line flag a field has (beyond `--policy FIELD=VALUE`, which every field has).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flag {
    None,
    /// `--field-name VALUE`.
    Value {
        value_name: &'static str,
        help: &'static str,
    },
    /// `--field-name`, which sets it to true.
    Switch {
        help: &'static str,
    },
    /// `--no-field-name`, which sets it to false.
    Negated {
        help: &'static str,
    },
    /// `--field-name VALUE`, one of `choices`.
    Choice {
        value_name: &'static str,
        choices: &'static [&'static str],
        help: &'static str,
    },
}

impl Flag {
    /// The long flag for `field` (`max_model_calls` -> `max-model-calls`), if it has one.
    pub fn long(&self, field: &str) -> Option<String> {
        let dashed = field.replace('_', "-");
        match self {
            Flag::None => None,
            Flag::Negated { .. } => Some(format!("no-{dashed}")),
            _ => Some(dashed),
        }
    }
}

/// How a field's value reads as a limit.
pub(crate) trait FieldValue {
    /// The value as a number, or `None` for off / unlimited.
    fn number(&self) -> Option<u64>;
    /// The value as a person reads it.
    fn words(&self) -> String {
        self.number()
            .map_or_else(|| "off".to_owned(), |n| n.to_string())
    }
    /// `Some(0)` means off.
    fn normalize(&mut self) {}
    /// How a request writes the value whose `number` is `n`.
    fn json(n: u64) -> serde_json::Value
    where
        Self: Sized,
    {
        serde_json::Value::from(n)
    }
}

impl FieldValue for u32 {
    fn number(&self) -> Option<u64> {
        Some(u64::from(*self))
    }
}

impl FieldValue for u64 {
    fn number(&self) -> Option<u64> {
        Some(*self)
    }
}

impl FieldValue for usize {
    fn number(&self) -> Option<u64> {
        Some(u64::try_from(*self).unwrap_or(u64::MAX))
    }
}

impl FieldValue for buddy_core::Usd {
    /// In nano-dollars, so every amount compares exactly.
    fn number(&self) -> Option<u64> {
        Some(self.nanos())
    }
    fn words(&self) -> String {
        self.to_string()
    }
    fn json(n: u64) -> serde_json::Value {
        serde_json::Value::from(buddy_core::Usd::from_nanos(n).dollars())
    }
}

impl FieldValue for bool {
    fn number(&self) -> Option<u64> {
        Some(u64::from(*self))
    }
    fn words(&self) -> String {
        self.to_string()
    }
}

impl FieldValue for OnLimit {
    /// `error` is the tighter setting: `finalize` costs one more model call.
    fn number(&self) -> Option<u64> {
        Some(match self {
            OnLimit::Error => 0,
            OnLimit::Finalize => 1,
        })
    }
    fn words(&self) -> String {
        match self {
            OnLimit::Error => "error",
            OnLimit::Finalize => "finalize",
        }
        .to_owned()
    }
}

impl FieldValue for UnattendedElicitation {
    fn number(&self) -> Option<u64> {
        Some(match self {
            UnattendedElicitation::Decline => 0,
            UnattendedElicitation::Cancel => 1,
            UnattendedElicitation::Defaults => 2,
        })
    }
    fn words(&self) -> String {
        match self {
            UnattendedElicitation::Decline => "decline",
            UnattendedElicitation::Cancel => "cancel",
            UnattendedElicitation::Defaults => "defaults",
        }
        .to_owned()
    }
}

impl<T: FieldValue + Copy + Default + PartialEq> FieldValue for Option<T> {
    fn number(&self) -> Option<u64> {
        self.as_ref().and_then(FieldValue::number)
    }
    fn words(&self) -> String {
        self.as_ref()
            .map_or_else(|| "off".to_owned(), FieldValue::words)
    }
    fn normalize(&mut self) {
        if *self == Some(T::default()) {
            *self = None;
        }
    }
    fn json(n: u64) -> serde_json::Value {
        T::json(n)
    }
}

/// A field a patch sets: its typed value, and the JSON it was given as, which the patch
/// writes back unchanged (a settings file or a conversation's stored settings read back
/// as written: `1` stays `1`, not `1.0`).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Given<T> {
    pub(crate) value: T,
    pub(crate) json: serde_json::Value,
}

/// `json` as a field's type, or the error that names the field.
pub(crate) fn typed<T: serde::de::DeserializeOwned>(
    field: &str,
    json: &serde_json::Value,
) -> Result<T, super::PolicyError> {
    serde_json::from_value(json.clone()).map_err(|e| super::PolicyError::InvalidValue {
        field: field.to_owned(),
        message: strip_serde_position(&e.to_string()),
    })
}

/// A serde message without the position serde puts at its end.
fn strip_serde_position(message: &str) -> String {
    match message.find(" at line ") {
        Some(i) => message[..i].to_owned(),
        None => message.to_owned(),
    }
}

/// Declares the policy once: each field with its doc, type, default, check, ceiling
/// rule and flag. Generates `LoopPolicy`, its `Default`, `POLICY_FIELDS`, and the typed
/// fields of a patch (`PatchFields`).
macro_rules! policy_fields {
    ($(
        $(#[doc = $doc:literal])+
        $name:ident: $ty:ty = $default:expr;
            check $check:expr; ceiling $ceiling:expr; flag $flag:expr;
    )+) => {
        /// The limits and guards of one turn, declared field by field in `policy/fields.rs`
        /// (defaults follow the design's guard table).
        ///
        /// Optional guards are `None` when off; in a patch, `0` (or JSON `null`) turns them off.
        #[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
        #[serde(default, deny_unknown_fields)]
        pub struct LoopPolicy {
            $( $(#[doc = $doc])+ pub $name: $ty, )+
        }

        impl Default for LoopPolicy {
            fn default() -> Self {
                LoopPolicy { $( $name: $default, )+ }
            }
        }

        /// Every policy field, in declaration order: the one table that defaults,
        /// validation, ceilings, patches and the command-line flags are driven by.
        pub static POLICY_FIELDS: &[$crate::policy::Field] = &[$(
            $crate::policy::Field {
                name: stringify!($name),
                doc: concat!($($doc, "\n"),+),
                check: $check,
                ceiling: $ceiling,
                flag: $flag,
                number: |p: &LoopPolicy| $crate::policy::table::FieldValue::number(&p.$name),
                words: |p: &LoopPolicy| $crate::policy::table::FieldValue::words(&p.$name),
                normalize: |p: &mut LoopPolicy| $crate::policy::table::FieldValue::normalize(&mut p.$name),
                json: <$ty as $crate::policy::table::FieldValue>::json,
            },
        )+];

        /// The fields a patch sets, typed: `None` where it leaves the policy's value.
        #[derive(Clone, Debug, Default, PartialEq)]
        pub(crate) struct PatchFields {
            $( $name: Option<$crate::policy::table::Given<$ty>>, )+
        }

        impl PatchFields {
            /// Sets field `name` from `json`, checked on its own (its type, then its range
            /// in a default policy), so an error always names the field that is wrong.
            pub(crate) fn set(
                &mut self,
                name: &str,
                json: serde_json::Value,
            ) -> Result<(), $crate::policy::PolicyError> {
                match name {
                    $( stringify!($name) => {
                        let value: $ty = $crate::policy::table::typed(name, &json)?;
                        let mut probe = LoopPolicy { $name: value, ..LoopPolicy::default() };
                        probe.normalize_off_values();
                        probe.validate()?;
                        self.$name = Some($crate::policy::table::Given { value, json });
                        Ok(())
                    } )+
                    _ => Err($crate::policy::PolicyError::UnknownField {
                        field: name.to_owned(),
                        known: LoopPolicy::field_names().join(", "),
                    }),
                }
            }

            /// Sets every field this patch sets in `policy` (unchecked: see `LoopPolicy::apply`).
            pub(crate) fn apply_to(&self, policy: &mut LoopPolicy) {
                $( if let Some(given) = &self.$name {
                    policy.$name = given.value;
                } )+
            }

            /// Layers `other` on top: the fields it sets replace these.
            pub(crate) fn merge(&mut self, other: &PatchFields) {
                $( if let Some(given) = &other.$name {
                    self.$name = Some(given.clone());
                } )+
            }

            /// The fields set, by name in alphabetical order, with the JSON they were given as.
            pub(crate) fn given(&self) -> Vec<(&'static str, &serde_json::Value)> {
                let mut given = Vec::new();
                $( if let Some(field) = &self.$name {
                    given.push((stringify!($name), &field.json));
                } )+
                given.sort_unstable_by_key(|(name, _)| *name);
                given
            }
        }
    };
}

pub(crate) use policy_fields;
