//! Fitting a history into a token budget without ever breaking it.
//!
//! The history is handled in whole groups: an assistant message together with all of
//! its tool results, or a lone user or assistant message. The leading system messages
//! and the latest user message are pinned. When the request does not fit:
//! 1. any single tool result longer than a quarter of the budget is cut in place (its
//!    start and its end kept, a marker where its middle was), rather than dropped;
//! 2. the oldest groups are dropped (never the newest group of the current turn), and a
//!    short system note tells the model that earlier messages were left out;
//! 3. if it still does not fit, the remaining tool results are cut further;
//! 4. if it still does not fit (a wide parallel round in a small window), every remaining
//!    result keeps only its marker;
//! 5. if even the pinned messages cannot fit, the caller gets [`Overflow`] — never a
//!    request without its user message.

use std::borrow::Cow;

use buddy_core::Message;

use super::counter::TokenCounter;
use crate::words;

/// A history that fits, and what fitting it cost.
#[derive(Debug)]
pub struct Fitted<'a> {
    pub messages: Cow<'a, [Message]>,
    /// Tokens of `messages` plus the reply priming.
    pub tokens: usize,
    /// Messages of the history left out of this request.
    pub dropped: usize,
    /// Tool results cut to fit.
    pub truncated: usize,
}

impl Fitted<'_> {
    /// The same fit, owning its messages (a request built from messages of its own).
    pub fn into_owned(self) -> Fitted<'static> {
        Fitted {
            messages: Cow::Owned(self.messages.into_owned()),
            tokens: self.tokens,
            dropped: self.dropped,
            truncated: self.truncated,
        }
    }
}

/// Even the pinned messages do not fit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "what the request cannot leave out needs {needed} tokens but only {budget} are available; the largest part is {largest}"
)]
pub struct Overflow {
    pub needed: usize,
    pub budget: usize,
    /// What takes the most room, in words: "the system prompt (N tokens)", "the tool
    /// calls of the model's latest reply (N tokens)", "a tool result (N tokens)", …
    pub largest: String,
}

/// Smallest size (in tokens, framing included) a tool result is cut to.
const MIN_RESULT_TOKENS: usize = 64;

#[derive(Debug)]
struct Group {
    start: usize,
    end: usize,
    pinned: bool,
    dropped: bool,
}

/// Fits `messages` (whose per-message token counts are `counts`, totalling `total`)
/// into `budget` tokens.
pub fn fit<'a>(
    messages: &'a [Message],
    counts: &[usize],
    total: usize,
    budget: usize,
    counter: &dyn TokenCounter,
) -> Result<Fitted<'a>, Overflow> {
    let priming = counter.reply_priming();
    if total + priming <= budget {
        return Ok(Fitted {
            messages: Cow::Borrowed(messages),
            tokens: total + priming,
            dropped: 0,
            truncated: 0,
        });
    }
    let mut trim = Trim::new(messages, counts, total, budget, counter);
    trim.cut_huge_results();
    trim.drop_oldest_groups(budget);
    if trim.over() {
        trim.cut_results_evenly();
    }
    if trim.over() {
        trim.keep_only_markers();
    }
    trim.finish()
}

/// Share of the budget, in percent, a history is trimmed down to once it must be trimmed
/// ([`fit_stepped`]): a step frees two fifths of the room, so a long turn changes its
/// prefix (and misses the provider's prompt cache) once every several calls, not on each.
pub const LOW_WATER_PERCENT: usize = 60;

/// [`fit`] in large steps, for a history that grows call by call: the messages before
/// `floor` (an index the previous fit returned; 0 at first) stay left out, so the request
/// keeps the previous one as its prefix; when the history no longer fits, the oldest
/// groups go until it takes [`LOW_WATER_PERCENT`] of `budget`. Returns the fit and the
/// floor for the next call (the end of the last group left out; 0 when none was).
pub fn fit_stepped<'a>(
    messages: &'a [Message],
    counts: &[usize],
    total: usize,
    budget: usize,
    counter: &dyn TokenCounter,
    floor: usize,
) -> Result<(Fitted<'a>, usize), Overflow> {
    if total + counter.reply_priming() <= budget {
        return fit(messages, counts, total, budget, counter).map(|f| (f, 0));
    }
    let mut trim = Trim::new(messages, counts, total, budget, counter);
    trim.cut_huge_results();
    trim.drop_before(floor);
    if trim.over() {
        trim.drop_oldest_groups(budget * LOW_WATER_PERCENT / 100);
    } else {
        trim.keep_user_first();
    }
    if trim.over() {
        trim.cut_results_evenly();
    }
    if trim.over() {
        trim.keep_only_markers();
    }
    let floor = trim
        .groups
        .iter()
        .filter(|g| g.dropped)
        .map(|g| g.end)
        .max()
        .unwrap_or(0);
    trim.finish().map(|fitted| (fitted, floor))
}

/// A history being trimmed: which groups are dropped, which results cut, and the size
/// of what is kept.
struct Trim<'a, 'c> {
    messages: &'a [Message],
    counts: &'c [usize],
    budget: usize,
    counter: &'c dyn TokenCounter,
    priming: usize,
    /// An upper bound on the note's size, whatever the number of dropped messages.
    note_tokens: usize,
    latest_user: Option<usize>,
    groups: Vec<Group>,
    /// Each message's size as it stands (cut or not).
    sizes: Vec<usize>,
    /// The cut form of each message that was cut.
    cut: Vec<Option<Message>>,
    /// Tokens of the messages kept.
    kept: usize,
    any_dropped: bool,
}

impl<'a, 'c> Trim<'a, 'c> {
    fn new(
        messages: &'a [Message],
        counts: &'c [usize],
        total: usize,
        budget: usize,
        counter: &'c dyn TokenCounter,
    ) -> Self {
        Trim {
            messages,
            counts,
            budget,
            counter,
            priming: counter.reply_priming(),
            note_tokens: counter.message(&elision_note(usize::MAX)),
            latest_user: messages.iter().rposition(Message::is_user),
            groups: groups(messages),
            sizes: counts.to_vec(),
            cut: vec![None; messages.len()],
            kept: total,
            any_dropped: false,
        }
    }

    /// Tokens the request takes, with the note when `with_note`.
    fn used(&self, with_note: bool) -> usize {
        self.kept + self.priming + if with_note { self.note_tokens } else { 0 }
    }

    /// True while the request does not fit.
    fn over(&self) -> bool {
        self.used(self.any_dropped) > self.budget
    }

    fn is_result(&self, i: usize) -> bool {
        matches!(self.messages[i], Message::Tool { .. })
    }

    /// Cuts the result at `i` to `target` tokens; with `only_if_smaller`, keeps it
    /// unless the cut form is smaller.
    fn cut_result(&mut self, i: usize, target: usize, only_if_smaller: bool) {
        let (message, size) = cut_result(&self.messages[i], self.counts[i], target, self.counter);
        if only_if_smaller && size >= self.sizes[i] {
            return;
        }
        self.kept = self.kept - self.sizes[i] + size;
        self.sizes[i] = size;
        self.cut[i] = Some(message);
    }

    fn drop_group(&mut self, g: usize) {
        let group = &mut self.groups[g];
        group.dropped = true;
        self.any_dropped = true;
        self.kept -= self.sizes[group.start..group.end].iter().sum::<usize>();
    }

    /// The messages of the groups not dropped.
    fn kept_indices(&self) -> Vec<usize> {
        self.groups
            .iter()
            .filter(|g| !g.dropped)
            .flat_map(|g| g.start..g.end)
            .collect()
    }

    /// 1. A single huge result is cut in place rather than costing its whole group.
    fn cut_huge_results(&mut self) {
        let cap = (self.budget / 4).max(MIN_RESULT_TOKENS);
        for i in 0..self.messages.len() {
            if self.sizes[i] > cap && self.is_result(i) {
                self.cut_result(i, cap, false);
            }
        }
    }

    /// The newest group of the current turn (the results the model is working on).
    fn newest(&self) -> Option<usize> {
        self.groups
            .iter()
            .rposition(|g| !g.pinned)
            .filter(|&i| Some(self.groups[i].start) > self.latest_user)
    }

    /// The groups a previous step left out (those that begin before `floor`), but never
    /// the pinned ones nor the newest.
    fn drop_before(&mut self, floor: usize) {
        let newest = self.newest();
        for g in 0..self.groups.len() {
            let group = &self.groups[g];
            if group.start < floor && !group.pinned && !group.dropped && Some(g) != newest {
                self.drop_group(g);
            }
        }
    }

    /// 2. Oldest groups first, until the request takes at most `target` tokens; never the
    ///    pinned ones nor the newest group of the current turn (the results the model is
    ///    working on); earlier turns are all fair game.
    fn drop_oldest_groups(&mut self, target: usize) {
        let newest = self.newest();
        for g in 0..self.groups.len() {
            if self.used(self.any_dropped) <= target {
                break;
            }
            if !self.groups[g].pinned && !self.groups[g].dropped && Some(g) != newest {
                self.drop_group(g);
            }
        }
        self.keep_user_first();
    }

    /// The Messages API wants a user message first: drop assistant groups that would now
    /// lead the conversation.
    fn keep_user_first(&mut self) {
        let latest_user = self.latest_user;
        for g in 0..self.groups.len() {
            let group = &self.groups[g];
            if group.pinned || group.dropped {
                continue;
            }
            if Some(group.start) > latest_user
                || !matches!(self.messages[group.start], Message::Assistant { .. })
            {
                break;
            }
            self.drop_group(g);
        }
    }

    /// 3. Still too big: cut the remaining results further, evenly.
    fn cut_results_evenly(&mut self) {
        let results: Vec<usize> = self
            .kept_indices()
            .into_iter()
            .filter(|&i| self.is_result(i))
            .collect();
        if results.is_empty() {
            return;
        }
        let others =
            self.used(self.any_dropped) - results.iter().map(|&i| self.sizes[i]).sum::<usize>();
        let share = (self.budget.saturating_sub(others) / results.len()).max(MIN_RESULT_TOKENS);
        for &i in &results {
            if self.sizes[i] > share {
                self.cut_result(i, share, false);
            }
        }
    }

    /// 4. Still too big (a wide parallel round in a small window): every remaining result
    ///    keeps only its marker, saying how big it was — the calls and their pairing stay,
    ///    and the model can ask again for less.
    fn keep_only_markers(&mut self) {
        for i in self.kept_indices() {
            if self.is_result(i) {
                self.cut_result(i, 0, true);
            }
        }
    }

    /// 5. What is left must fit, or the turn cannot go on. The note is a courtesy: when it
    ///    alone would tip the request over, it is left out.
    fn finish(mut self) -> Result<Fitted<'a>, Overflow> {
        let with_note = self.any_dropped && self.used(true) <= self.budget;
        let needed = self.used(with_note);
        if needed > self.budget {
            let largest = self
                .kept_indices()
                .into_iter()
                .max_by_key(|&i| self.sizes[i])
                .map_or_else(String::new, |i| {
                    describe(
                        &self.messages[i],
                        i == self.latest_user.unwrap_or(usize::MAX),
                        self.sizes[i],
                    )
                });
            return Err(Overflow {
                needed,
                budget: self.budget,
                largest,
            });
        }
        let dropped: usize = self
            .groups
            .iter()
            .filter(|g| g.dropped)
            .map(|g| g.end - g.start)
            .sum();
        let mut out = Vec::with_capacity(self.messages.len() - dropped + 1);
        let mut tokens = self.priming;
        let mut truncated = 0;
        let mut noted = !with_note;
        for g in self.groups.iter().filter(|g| !g.dropped) {
            if !noted && !matches!(self.messages[g.start], Message::System { .. }) {
                let note = elision_note(dropped);
                tokens += self.counter.message(&note);
                out.push(note);
                noted = true;
            }
            for i in g.start..g.end {
                tokens += self.sizes[i];
                match self.cut[i].take() {
                    Some(shortened) => {
                        truncated += 1;
                        out.push(shortened);
                    }
                    None => out.push(self.messages[i].clone()),
                }
            }
        }
        Ok(Fitted {
            messages: Cow::Owned(out),
            tokens,
            dropped,
            truncated,
        })
    }
}

/// The note that tells the model earlier messages were left out.
fn elision_note(dropped: usize) -> Message {
    Message::system(words::elision_note(dropped))
}

/// One message of a request, in words, with its size.
fn describe(message: &Message, is_latest_user: bool, tokens: usize) -> String {
    let what = match message {
        Message::System { .. } => "the system prompt",
        Message::User { .. } if is_latest_user => "the latest user message",
        Message::User { .. } => "an earlier user message",
        Message::Assistant { tool_calls, .. } if !tool_calls.is_empty() => {
            "the tool calls of the model's latest reply"
        }
        Message::Assistant { .. } => "an earlier answer",
        Message::Tool { .. } => "a tool result",
        Message::Note { .. } => "buddy's note",
    };
    format!("{what} ({tokens} tokens)")
}

/// Splits the history into groups; leading system messages and the latest user message are pinned.
fn groups(messages: &[Message]) -> Vec<Group> {
    let latest_user = messages.iter().rposition(Message::is_user);
    let mut out = Vec::new();
    let mut i = 0;
    let mut leading = true;
    while i < messages.len() {
        let start = i;
        i += 1;
        let pinned = match &messages[start] {
            Message::System { .. } if leading => true,
            Message::Assistant { tool_calls, .. } if !tool_calls.is_empty() => {
                // Its results, and buddy's note after them, go with it.
                while i < messages.len()
                    && matches!(messages[i], Message::Tool { .. } | Message::Note { .. })
                {
                    i += 1;
                }
                false
            }
            _ => Some(start) == latest_user,
        };
        leading &= matches!(messages[start], Message::System { .. });
        out.push(Group {
            start,
            end: i,
            pinned,
            dropped: false,
        });
    }
    out
}

/// A tool result cut so the whole message (framing and marker included) takes at most
/// `target` tokens, and its exact size. Its head and its tail are kept; with nothing of
/// it kept, a short marker says how big it was.
fn cut_result(
    message: &Message,
    tokens: usize,
    target: usize,
    counter: &dyn TokenCounter,
) -> (Message, usize) {
    let Message::Tool {
        tool_call_id,
        content,
        is_error,
    } = message
    else {
        return (message.clone(), tokens);
    };
    // The head and the tail are kept, the middle cut: a log's verdict is its last line.
    let build = |keep: usize| {
        let text = if keep == 0 {
            words::left_out_marker(tokens)
        } else {
            let (head, tail) = buddy_core::head_and_tail(content, keep);
            format!("{head}{}{tail}", words::cut_marker(tokens, target))
        };
        let message = Message::tool_result(tool_call_id.clone(), text, *is_error);
        let size = counter.message(&message);
        (message, size)
    };
    let mut keep = content.len() * target / tokens.max(1);
    loop {
        while keep > 0 && !content.is_char_boundary(keep) {
            keep -= 1;
        }
        let (message, size) = build(keep);
        if size <= target || keep == 0 {
            return (message, size);
        }
        // Shrink in proportion to the excess, and by at least a tenth.
        keep = (keep * target / size).min(keep * 9 / 10);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::EstimateCounter;
    use buddy_core::ToolCall;

    fn fit_all(messages: &[Message], budget: usize) -> Result<Fitted<'_>, Overflow> {
        let counts: Vec<usize> = messages
            .iter()
            .map(|m| EstimateCounter.message(m))
            .collect();
        let total = counts.iter().sum();
        fit(messages, &counts, total, budget, &EstimateCounter)
    }

    fn round(id: &str, result: &str) -> [Message; 2] {
        [
            Message::Assistant {
                content: None,
                tool_calls: vec![ToolCall::new(id, "read", "{}")],
            },
            Message::tool_result(id, result, false),
        ]
    }

    #[test]
    fn a_fitting_history_is_borrowed_unchanged() {
        let history = vec![Message::system("s"), Message::user("u")];
        let fitted = fit_all(&history, 1000).unwrap();
        assert!(matches!(fitted.messages, Cow::Borrowed(_)));
        assert_eq!(fitted.dropped, 0);
    }

    #[test]
    fn old_groups_go_first_and_the_user_message_stays() {
        let mut history = vec![
            Message::system("rules"),
            Message::user("summarise the files"),
        ];
        for i in 0..6 {
            history.extend(round(
                &format!("c{i}"),
                &format!("file {i}: {}", "x".repeat(300)),
            ));
        }
        let fitted = fit_all(&history, 400).unwrap();
        let kept = &fitted.messages;
        assert!(fitted.dropped > 0);
        assert_eq!(kept[0], Message::system("rules"));
        assert!(kept[1].text().unwrap().contains("left out"));
        assert_eq!(kept[2], Message::user("summarise the files"));
        assert_eq!(
            kept.last().unwrap().text().unwrap().get(..6),
            Some("file 5"),
            "the newest group stays"
        );
        crate::check_history(kept).unwrap();
        assert!(fitted.tokens <= 400);
    }

    #[test]
    fn one_huge_result_is_cut_in_place_not_dropped() {
        let mut history = vec![Message::user("read it")];
        history.extend(round(
            "c1",
            &format!("{}\nerror: the build failed", "y".repeat(20_000)),
        ));
        let fitted = fit_all(&history, 1_000).unwrap();
        assert_eq!((fitted.dropped, fitted.truncated), (0, 1));
        let result = fitted.messages.last().unwrap().text().unwrap();
        assert!(
            result.starts_with("yyyy")
                && result.contains("[system note: this result was cut from about")
                && result.ends_with("yyyy\nerror: the build failed"),
            "the start and the end are kept: {result}"
        );
        assert!(fitted.tokens <= 1_000);
    }

    #[test]
    fn pinned_messages_that_cannot_fit_overflow() {
        let history = vec![Message::system("s".repeat(2_000)), Message::user("u")];
        let err = fit_all(&history, 100).unwrap_err();
        assert!(err.needed > 100 && err.budget == 100);
    }
}
