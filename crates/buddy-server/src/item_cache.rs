//! Output items this process produced, by key and id, so that a client may send them
//! back as `item_reference`s (the Vercel AI SDK does, for its earlier steps). A key finds
//! only its own items; their ids hold the response's random id, so they cannot be
//! guessed either. Bounded by count and by bytes, the oldest forgotten first, and each
//! kept at most an hour; a reference to a forgotten or another key's item is refused
//! alike. Held by the server's state.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use buddy_openai_wire::responses::Item;

/// Items kept for `item_reference`s.
const ITEM_CACHE: usize = 10_000;
/// Bytes (of their JSON) the kept items may hold together: a client that sends back
/// huge tool-call arguments by reference finds them for a while, not forever.
const ITEM_CACHE_BYTES: usize = 64 * 1024 * 1024;
/// How long an item is kept: a client refers to the items of its last few steps.
const ITEM_LASTS: Duration = Duration::from_secs(3600);

/// The items of this process's responses, by owner and id.
pub(crate) struct ItemCache {
    kept: Mutex<Kept>,
    max_items: usize,
    max_bytes: usize,
    lasts: Duration,
}

impl Default for ItemCache {
    fn default() -> Self {
        ItemCache {
            kept: Mutex::default(),
            max_items: ITEM_CACHE,
            max_bytes: ITEM_CACHE_BYTES,
            lasts: ITEM_LASTS,
        }
    }
}

#[derive(Default)]
struct Kept {
    items: HashMap<String, (Item, usize, Instant)>,
    /// Keys in the order they were kept, with when.
    order: VecDeque<(String, Instant)>,
    bytes: usize,
}

impl Kept {
    fn forget_oldest(&mut self) {
        if let Some((old, _)) = self.order.pop_front()
            && let Some((_, size, _)) = self.items.remove(&old)
        {
            self.bytes -= size;
        }
    }
}

/// Where an owner's item is kept.
fn item_key(owner: &str, id: &str) -> String {
    format!("{owner}\u{1f}{id}")
}

impl ItemCache {
    /// Keeps `item` (one with an id) for `owner`, forgetting the oldest past the bounds.
    pub(crate) fn remember(&self, owner: &str, item: &Item) {
        self.remember_at(owner, item, Instant::now());
    }

    fn remember_at(&self, owner: &str, item: &Item, now: Instant) {
        let Some(id) = item.id() else {
            return;
        };
        let size = buddy_core::json_len(item).unwrap_or(0) + owner.len() + id.len();
        if size > self.max_bytes {
            return;
        }
        let key = item_key(owner, id);
        let Ok(mut cache) = self.kept.lock() else {
            return;
        };
        match cache.items.insert(key.clone(), (item.clone(), size, now)) {
            Some((_, old, _)) => cache.bytes -= old,
            None => cache.order.push_back((key, now)),
        }
        cache.bytes += size;
        while cache.order.len() > self.max_items
            || cache.bytes > self.max_bytes
            || cache
                .order
                .front()
                .is_some_and(|(_, at)| now.saturating_duration_since(*at) > self.lasts)
        {
            cache.forget_oldest();
        }
    }

    /// `owner`'s item `id`, if it is still kept.
    pub(crate) fn get(&self, owner: &str, id: &str) -> Option<Item> {
        self.get_at(owner, id, Instant::now())
    }

    fn get_at(&self, owner: &str, id: &str, now: Instant) -> Option<Item> {
        let cache = self.kept.lock().ok()?;
        let (item, _, at) = cache.items.get(&item_key(owner, id))?;
        (now.saturating_duration_since(*at) <= self.lasts).then(|| item.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(id: &str, bytes: usize) -> Item {
        serde_json::from_value(serde_json::json!({"type": "function_call", "id": id,
            "call_id": id, "name": "f", "arguments": "x".repeat(bytes)}))
        .unwrap()
    }

    #[test]
    fn the_cache_stays_within_its_bytes_the_oldest_going_first_and_items_expire() {
        let cache = ItemCache {
            max_bytes: 10_000,
            ..ItemCache::default()
        };
        let start = Instant::now();
        for n in 0..10 {
            cache.remember_at("me", &item(&format!("fc_{n}"), 3_000), start);
        }
        let kept: Vec<bool> = (0..10)
            .map(|n| cache.get_at("me", &format!("fc_{n}"), start).is_some())
            .collect();
        assert_eq!(kept.iter().filter(|k| **k).count(), 3, "{kept:?}");
        assert!(kept[7] && kept[8] && kept[9]);
        assert!(cache.kept.lock().unwrap().bytes <= 10_000);
        // Larger than the whole budget: not kept, nothing else forgotten for it.
        cache.remember_at("me", &item("fc_huge", 20_000), start);
        assert!(cache.get_at("me", "fc_huge", start).is_none());
        assert!(cache.get_at("me", "fc_9", start).is_some());
        // Another key never finds it; an hour on, nobody does.
        assert!(cache.get_at("you", "fc_9", start).is_none());
        let later = start + ITEM_LASTS + Duration::from_secs(1);
        assert!(cache.get_at("me", "fc_9", later).is_none());
        cache.remember_at("me", &item("fc_new", 10), later);
        assert_eq!(
            cache.kept.lock().unwrap().items.len(),
            1,
            "the expired are pruned"
        );
    }
}
