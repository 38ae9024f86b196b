//! What a person sends to a running turn through another instance than the one that
//! runs it: an answer to a tool's question, kept in the database until the running
//! instance takes it and says what became of it (see [`crate::Coordinator::post_answer`]).

/// An answer posted for a question of a turn that runs elsewhere.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PostedAnswer {
    /// Its number, to read its verdict by.
    pub seq: i64,
    /// The turn asked.
    pub turn_id: String,
    /// The question's id (`elicit_3`).
    pub question: String,
    /// The answer, as its JSON.
    pub answer: String,
}

/// What the running instance made of a posted answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AnswerVerdict {
    /// Taken: it reached the tool.
    Taken,
    /// No such question in the turn (or the turn ended); the words say which.
    Unknown(String),
    /// The question was answered already.
    Answered(String),
    /// The content does not fit the question's form; the question stays open.
    Invalid(String),
}

impl AnswerVerdict {
    /// The verdict as its stored word and detail.
    pub(crate) fn to_columns(&self) -> (&'static str, &str) {
        match self {
            AnswerVerdict::Taken => ("taken", ""),
            AnswerVerdict::Unknown(d) => ("unknown", d),
            AnswerVerdict::Answered(d) => ("answered", d),
            AnswerVerdict::Invalid(d) => ("invalid", d),
        }
    }

    /// The verdict from its stored word and detail (an unknown word reads as `Unknown`).
    pub(crate) fn from_columns(word: &str, detail: String) -> Self {
        match word {
            "taken" => AnswerVerdict::Taken,
            "answered" => AnswerVerdict::Answered(detail),
            "invalid" => AnswerVerdict::Invalid(detail),
            _ => AnswerVerdict::Unknown(detail),
        }
    }
}

/// What waits in the database for the turns this instance runs: cancels asked and
/// answers posted through other instances (a poll's catch of a missed notification).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Waiting {
    /// Turns whose cancel was asked.
    pub cancels: Vec<String>,
    /// Answers not yet taken, oldest first.
    pub answers: Vec<PostedAnswer>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_read_back_as_written() {
        for verdict in [
            AnswerVerdict::Taken,
            AnswerVerdict::Unknown("no such question".into()),
            AnswerVerdict::Answered("already".into()),
            AnswerVerdict::Invalid("`name` is required".into()),
        ] {
            let (word, detail) = verdict.to_columns();
            assert_eq!(
                AnswerVerdict::from_columns(word, detail.to_owned()),
                verdict
            );
        }
        assert_eq!(
            AnswerVerdict::from_columns("garbled", "x".into()),
            AnswerVerdict::Unknown("x".into())
        );
    }
}
