//! Output items this process produced, by key and id, so that a client may send them
//! back as `item_reference`s (the Vercel AI SDK does, for its earlier steps). A key finds
//! only its own items; their ids hold the response's random id, so they cannot be
//! guessed either. Bounded: the oldest are forgotten first; a reference to a forgotten
//! or another key's item is refused alike. Held by the server's state.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use buddy_openai_wire::responses::Item;

/// Items kept for `item_reference`s.
const ITEM_CACHE: usize = 10_000;

/// The items of this process's responses, by owner and id.
#[derive(Default)]
pub(crate) struct ItemCache(Mutex<Kept>);

#[derive(Default)]
struct Kept {
    items: HashMap<String, Item>,
    order: VecDeque<String>,
}

/// Where an owner's item is kept.
fn item_key(owner: &str, id: &str) -> String {
    format!("{owner}\u{1f}{id}")
}

impl ItemCache {
    /// Keeps `item` (one with an id) for `owner`, forgetting the oldest past the bound.
    pub(crate) fn remember(&self, owner: &str, item: &Item) {
        let Some(id) = item.id() else {
            return;
        };
        let key = item_key(owner, id);
        if let Ok(mut cache) = self.0.lock() {
            if cache.items.insert(key.clone(), item.clone()).is_none() {
                cache.order.push_back(key);
            }
            while cache.order.len() > ITEM_CACHE {
                if let Some(old) = cache.order.pop_front() {
                    cache.items.remove(&old);
                }
            }
        }
    }

    /// `owner`'s item `id`, if it is still kept.
    pub(crate) fn get(&self, owner: &str, id: &str) -> Option<Item> {
        self.0.lock().ok()?.items.get(&item_key(owner, id)).cloned()
    }
}
