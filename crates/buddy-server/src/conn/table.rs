//! The connection table: who holds a connection, how far each is with its requests,
//! and — when the table or one address's share of it is full — which connection makes
//! room for a new one.
//!
//! A full table does not keep new clients out: a connection of the address holding the
//! most is shed, so a flood from a few addresses never costs a client elsewhere its
//! connection, even one that waits before it sends its request. Never one whose request
//! is being answered; within the address first connections that never showed a key and
//! wait (silent, slow headers, idle between requests), then such connections still
//! sending a body, then idle connections (or readers of a running turn) of clients with
//! a key, then theirs still sending a body; the longest idle first within each rank. One
//! client address may hold only so many: past that its own idlest connection without a
//! key makes room. Behind a trusted proxy the client address is the one it forwards.

use std::cmp::Reverse;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use super::per_key::PerKey;
use super::slot::{Shed, Slot};
use crate::settings::{TrustedProxies, canonical};

/// What bounds a table.
#[derive(Clone, Debug, Default)]
pub(crate) struct Limits {
    /// Connections at once (0 counts as 1).
    pub max: usize,
    /// Connections from one client address (0: no limit).
    pub per_address: usize,
    /// Readers of running turns one key may hold.
    pub readers_per_key: usize,
    /// WebSocket sessions one key may hold.
    pub websockets_per_key: usize,
    /// Peers whose forwarded client address counts.
    pub trusted: TrustedProxies,
}

/// Every open connection of a server, with its limits.
#[derive(Debug)]
pub(crate) struct ConnTable {
    max: usize,
    per_address: usize,
    pub(super) trusted: TrustedProxies,
    pub(super) readers: Arc<PerKey>,
    pub(super) websockets: Arc<PerKey>,
    epoch: Instant,
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Entry {
    slot: Arc<Slot>,
    /// The client address it counts under.
    addr: IpAddr,
}

#[derive(Debug, Default)]
struct Inner {
    next_id: u64,
    slots: HashMap<u64, Entry>,
    by_address: HashMap<IpAddr, usize>,
}

impl Inner {
    fn count(&self, addr: IpAddr) -> usize {
        self.by_address.get(&addr).copied().unwrap_or(0)
    }

    fn leave_address(&mut self, addr: IpAddr) {
        if let Some(n) = self.by_address.get_mut(&addr) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.by_address.remove(&addr);
            }
        }
    }

    fn remove(&mut self, id: u64) -> Option<Arc<Slot>> {
        let entry = self.slots.remove(&id)?;
        self.leave_address(entry.addr);
        Some(entry.slot)
    }

    fn evict(&mut self, id: u64) {
        if let Some(slot) = self.remove(id) {
            slot.evicted.cancel();
        }
    }

    /// Makes room for one more connection of `addr` within its share, shedding its
    /// idlest connection without a key (never `except`); `Err` when it has none.
    fn make_room_at(
        &mut self,
        addr: IpAddr,
        per_address: usize,
        except: Option<u64>,
    ) -> Result<Option<Shed>, Shed> {
        if per_address == 0 || self.count(addr) < per_address {
            return Ok(None);
        }
        let victim = self
            .slots
            .values()
            .filter(|e| e.addr == addr && Some(e.slot.id) != except)
            .filter_map(|e| e.slot.rank().map(|(rank, idle)| (rank, idle, e.slot.id)))
            .filter(|(rank, _, _)| *rank < 2)
            .min();
        let Some((rank, _, id)) = victim else {
            return Err(Shed::AddressLimit);
        };
        self.evict(id);
        Ok(Some(Shed::of_rank(rank)))
    }

    /// Sheds the connection doing least of the address holding the most; `None` when
    /// every connection is being answered.
    fn shed_heaviest(&mut self) -> Option<Shed> {
        let victim = self
            .slots
            .values()
            .filter_map(|e| {
                let (rank, idle) = e.slot.rank()?;
                Some((Reverse(self.count(e.addr)), rank, idle, e.slot.id))
            })
            .min();
        let (_, rank, _, id) = victim?;
        self.evict(id);
        Some(Shed::of_rank(rank))
    }
}

/// A connection's place in the table; dropping it (every clone: a WebSocket session
/// keeps its connection's) gives it up.
#[derive(Debug)]
pub(crate) struct Admitted {
    table: Arc<ConnTable>,
    slot: Arc<Slot>,
}

impl Admitted {
    /// The connection as the table sees it.
    pub(crate) fn slot(&self) -> &Arc<Slot> {
        &self.slot
    }

    /// The table it has its place in.
    pub(crate) fn table(&self) -> &Arc<ConnTable> {
        &self.table
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.table.lock().remove(self.slot.id);
        metrics::gauge!("buddy_connections_open").decrement(1.0);
    }
}

impl ConnTable {
    /// A table within `limits`.
    pub(crate) fn new(limits: Limits) -> Arc<Self> {
        Arc::new(ConnTable {
            max: limits.max.max(1),
            per_address: limits.per_address,
            trusted: limits.trusted,
            readers: PerKey::new(limits.readers_per_key),
            websockets: PerKey::new(limits.websockets_per_key),
            epoch: Instant::now(),
            inner: Mutex::new(Inner::default()),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Open connections.
    pub(crate) fn len(&self) -> usize {
        self.lock().slots.len()
    }

    /// Admits a connection from `peer`, shedding one to make room within its address's
    /// share or the table. Returns its place and why another was shed, or why it is not
    /// admitted. A trusted proxy's connections count by the client each request names.
    pub(crate) fn admit(self: &Arc<Self>, peer: IpAddr) -> Result<(Admitted, Option<Shed>), Shed> {
        let addr = canonical(peer);
        let from_proxy = self.trusted.trusts(addr);
        let mut inner = self.lock();
        let mut shed = None;
        if !from_proxy {
            shed = inner.make_room_at(addr, self.per_address, None)?;
        }
        if inner.slots.len() >= self.max {
            shed = Some(inner.shed_heaviest().ok_or(Shed::Full)?);
        }
        inner.next_id += 1;
        let slot = Arc::new(Slot::new(inner.next_id, self.epoch, from_proxy));
        let entry = Entry {
            slot: Arc::clone(&slot),
            addr,
        };
        inner.slots.insert(slot.id, entry);
        *inner.by_address.entry(addr).or_default() += 1;
        drop(inner);
        metrics::gauge!("buddy_connections_open").increment(1.0);
        let table = Arc::clone(self);
        Ok((Admitted { table, slot }, shed))
    }

    /// Counts `slot` under `client` from now on (a trusted proxy's connection, for the
    /// client of its latest request), making room within that address's share.
    pub(crate) fn move_to(&self, slot: &Slot, client: IpAddr) -> Result<Option<Shed>, Shed> {
        let client = canonical(client);
        let mut inner = self.lock();
        let Some(from) = inner.slots.get(&slot.id).map(|e| e.addr) else {
            return Ok(None);
        };
        if from == client {
            return Ok(None);
        }
        let shed = inner.make_room_at(client, self.per_address, Some(slot.id))?;
        inner.leave_address(from);
        *inner.by_address.entry(client).or_default() += 1;
        if let Some(entry) = inner.slots.get_mut(&slot.id) {
            entry.addr = client;
        }
        Ok(shed)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::conn::slot::Stage;
    use crate::settings::Setting;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    fn table(max: usize, per_address: usize) -> Arc<ConnTable> {
        ConnTable::new(Limits {
            max,
            per_address,
            ..Limits::default()
        })
    }

    fn answering(place: &Admitted) {
        place.slot().request_started();
        place.slot().body_received();
    }

    #[test]
    fn a_full_table_sheds_by_rank_and_never_a_connection_being_answered() {
        let table = table(4, 0);
        let admit = |last| table.admit(ip(last));
        // One address: a client with a key, idle; one with a key, sending a body; one
        // being answered; one that never showed a key and is sending a body.
        let (keyed_idle, _) = admit(1).unwrap();
        keyed_idle.slot().authenticate();
        let (keyed_body, _) = admit(1).unwrap();
        keyed_body.slot().authenticate();
        keyed_body.slot().request_started();
        let (being_answered, _) = admit(1).unwrap();
        answering(&being_answered);
        let (anon_body, _) = admit(1).unwrap();
        anon_body.slot().request_started();

        let (new1, shed) = admit(1).unwrap();
        assert_eq!(shed, Some(Shed::Unauthenticated));
        assert!(anon_body.slot().is_evicted());
        // The newcomer (silent, no key) goes before clients with a key.
        let (_new2, shed) = admit(1).unwrap();
        assert_eq!(shed, Some(Shed::Unauthenticated));
        assert!(new1.slot().is_evicted());
        assert!(!keyed_idle.slot().is_evicted());
        assert_eq!(table.len(), 4);
    }

    #[test]
    fn idle_clients_with_a_key_go_before_their_bodies_and_the_longest_idle_first() {
        let table = table(3, 0);
        let (old, _) = table.admit(ip(1)).unwrap();
        old.slot().authenticate();
        let (sending, _) = table.admit(ip(1)).unwrap();
        sending.slot().authenticate();
        sending.slot().request_started();
        let (being_answered, _) = table.admit(ip(2)).unwrap();
        answering(&being_answered);
        let (_next, shed) = table.admit(ip(5)).unwrap();
        assert_eq!(shed, Some(Shed::Idle));
        assert!(old.slot().is_evicted());
        assert!(!sending.slot().is_evicted());
    }

    #[test]
    fn the_address_holding_the_most_makes_room_not_a_newcomer_elsewhere() {
        let table = table(6, 0);
        // A client elsewhere connected first and has not sent its request yet.
        let (waiting, _) = table.admit(ip(1)).unwrap();
        // A flood with a key, sending bodies slowly, from two addresses.
        let mut flood = Vec::new();
        for last in [2, 2, 2, 3, 3] {
            let (place, _) = table.admit(ip(last)).unwrap();
            place.slot().authenticate();
            place.slot().request_started();
            flood.push(place);
        }
        for _ in 0..20 {
            let (place, _) = table.admit(ip(3)).unwrap();
            flood.push(place);
        }
        assert!(
            !waiting.slot().is_evicted(),
            "the lone client keeps its place"
        );
        assert_eq!(table.len(), 6);
    }

    #[test]
    fn when_every_connection_is_being_answered_a_new_one_is_refused() {
        let table = table(2, 0);
        let mut held = Vec::new();
        for n in 0..2 {
            let (place, _) = table.admit(ip(n)).unwrap();
            answering(&place);
            held.push(place);
        }
        assert_eq!(table.admit(ip(9)).err(), Some(Shed::Full));
        // The answer goes out to its end: that connection may be shed again.
        held[0].slot().request_ended(Stage::Serving);
        assert!(table.admit(ip(9)).is_ok());
    }

    #[test]
    fn a_reader_of_a_running_turn_is_shed_like_an_idle_connection() {
        let table = table(2, 0);
        let (reader, _) = table.admit(ip(1)).unwrap();
        reader.slot().authenticate();
        answering(&reader);
        reader.slot().started_watching();
        // Watching is not idling: the idle timeout does not close it.
        assert_eq!(reader.slot().idle_left(Duration::ZERO), None);
        let (other, _) = table.admit(ip(2)).unwrap();
        answering(&other);
        let (_new, shed) = table.admit(ip(3)).unwrap();
        assert_eq!(shed, Some(Shed::Idle));
        assert!(reader.slot().is_evicted());
    }

    #[test]
    fn a_full_share_sheds_its_idlest_connection_without_a_key_and_refuses_only_keyed_ones() {
        let table = table(100, 2);
        let (a, _) = table.admit(ip(1)).unwrap();
        let (b, _) = table.admit(ip(1)).unwrap();
        let (c, shed) = table.admit(ip(1)).unwrap();
        assert_eq!(shed, Some(Shed::Unauthenticated));
        assert!(a.slot().is_evicted() && !b.slot().is_evicted());
        // Both left have a key: the newcomer is refused.
        b.slot().authenticate();
        c.slot().authenticate();
        assert_eq!(table.admit(ip(1)).err(), Some(Shed::AddressLimit));
        assert!(table.admit(ip(2)).is_ok());
        // The same client over IPv6 counts as its IPv4 address.
        let mapped = IpAddr::V6(std::net::Ipv4Addr::new(127, 0, 0, 1).to_ipv6_mapped());
        assert_eq!(table.admit(mapped).err(), Some(Shed::AddressLimit));
        drop(b);
        assert!(table.admit(ip(1)).is_ok());
    }

    #[test]
    fn a_trusted_proxys_connections_count_by_the_client_each_request_names() {
        let table = ConnTable::new(Limits {
            max: 100,
            per_address: 2,
            trusted: TrustedProxies::parse("127.0.0.9").unwrap_or_default(),
            ..Limits::default()
        });
        // The proxy opens more than one address's share.
        let places: Vec<_> = (0..5).map(|_| table.admit(ip(9)).unwrap().0).collect();
        assert!(places.iter().all(|p| p.slot().from_proxy));
        let client = IpAddr::from([203, 0, 113, 5]);
        assert_eq!(table.move_to(places[0].slot(), client), Ok(None));
        places[1].slot().authenticate();
        assert_eq!(table.move_to(places[1].slot(), client), Ok(None));
        // The client's share is full: its idlest connection without a key makes room.
        assert_eq!(
            table.move_to(places[2].slot(), client),
            Ok(Some(Shed::Unauthenticated))
        );
        assert!(places[0].slot().is_evicted());
        places[2].slot().authenticate();
        assert_eq!(
            table.move_to(places[3].slot(), client),
            Err(Shed::AddressLimit)
        );
        // Another client behind the same proxy is not affected.
        let other = IpAddr::from([203, 0, 113, 6]);
        assert_eq!(table.move_to(places[3].slot(), other), Ok(None));
    }

    #[test]
    fn idle_time_counts_from_the_end_of_the_last_request() {
        let table = table(4, 0);
        let (place, _) = table.admit(ip(1)).unwrap();
        let slot = place.slot();
        let limit = Duration::from_secs(60);
        assert!(
            slot.idle_left(limit)
                .is_some_and(|left| left > Duration::from_secs(59))
        );
        slot.request_started();
        assert_eq!(slot.idle_left(limit), None, "busy");
        slot.body_received();
        assert_eq!(slot.idle_left(limit), None, "answering");
        slot.request_ended(Stage::Serving);
        assert!(slot.idle_left(limit).is_some());
        assert!(
            slot.idle_left(Duration::ZERO)
                .is_some_and(|left| left.is_zero())
        );
    }
}
