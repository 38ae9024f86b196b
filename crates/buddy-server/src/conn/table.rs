//! The connection table: who holds a connection, how far each is with its requests,
//! and — when the table is full — which connection makes room for a new one.
//!
//! A full table does not keep new clients out: the connection doing the least for
//! anyone is shed. Never one whose request is being answered; first connections that
//! never showed a key and wait (silent, slow headers, idle between requests), then such
//! connections still sending a body, then idle connections of clients with a key; the
//! longest idle first within each rank. One client address may hold only so many.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

/// One open connection as the table sees it.
#[derive(Debug)]
pub(crate) struct Slot {
    id: u64,
    addr: IpAddr,
    epoch: Instant,
    /// The connection sent a request with an accepted key.
    authenticated: AtomicBool,
    /// Requests whose body is still arriving.
    receiving: AtomicU32,
    /// Requests being answered (body in, response not yet sent to its end).
    serving: AtomicU32,
    /// When the connection last had no request in flight, in ms after `epoch`.
    idle_since_ms: AtomicU64,
    evicted: CancellationToken,
}

/// Why a connection was shed, or not admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shed {
    /// Its address already holds the most connections one address may.
    AddressLimit,
    /// The table is full and every connection in it is answering a request.
    Full,
    /// Made room for a new connection: it never showed a key.
    Unauthenticated,
    /// Made room for a new connection: idle, though its client has a key.
    Idle,
}

impl Shed {
    /// The label of `buddy_connections_shed_total`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Shed::AddressLimit => "address_limit",
            Shed::Full => "full",
            Shed::Unauthenticated => "unauthenticated",
            Shed::Idle => "idle",
        }
    }
}

impl Slot {
    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// The client sent a request with an accepted key on this connection.
    pub(crate) fn authenticate(&self) {
        self.authenticated.store(true, Ordering::Relaxed);
    }

    /// A request arrived (its body may still be on its way).
    pub(crate) fn request_started(&self) {
        self.receiving.fetch_add(1, Ordering::AcqRel);
    }

    /// A request's body is in: from now on it is being answered.
    pub(crate) fn body_received(&self) {
        self.serving.fetch_add(1, Ordering::AcqRel);
        self.receiving.fetch_sub(1, Ordering::AcqRel);
    }

    /// A request ended; `answered` when its body had come in.
    pub(crate) fn request_ended(&self, answered: bool) {
        let counter = if answered {
            &self.serving
        } else {
            &self.receiving
        };
        counter.fetch_sub(1, Ordering::AcqRel);
        self.idle_since_ms.store(self.now_ms(), Ordering::Relaxed);
    }

    fn busy(&self) -> bool {
        self.receiving.load(Ordering::Acquire) > 0 || self.serving.load(Ordering::Acquire) > 0
    }

    /// How much longer the connection may stay idle within `limit`; `None` while a
    /// request is in flight.
    pub(crate) fn idle_left(&self, limit: Duration) -> Option<Duration> {
        if self.busy() {
            return None;
        }
        let idle = self
            .now_ms()
            .saturating_sub(self.idle_since_ms.load(Ordering::Relaxed));
        Some(limit.saturating_sub(Duration::from_millis(idle)))
    }

    /// Resolves when the table sheds this connection to make room for another.
    pub(crate) async fn evicted(&self) {
        self.evicted.cancelled().await;
    }

    /// Lower goes first; `None` is never shed (a request is being answered).
    fn rank(&self) -> Option<(u8, u64)> {
        if self.serving.load(Ordering::Acquire) > 0 {
            return None;
        }
        let receiving = self.receiving.load(Ordering::Acquire) > 0;
        let rank = match (self.authenticated.load(Ordering::Relaxed), receiving) {
            (false, false) => 0,
            (false, true) => 1,
            (true, false) => 2,
            (true, true) => 3,
        };
        Some((rank, self.idle_since_ms.load(Ordering::Relaxed)))
    }
}

/// Every open connection of a server, with its limits.
#[derive(Debug)]
pub(crate) struct ConnTable {
    max: usize,
    per_address: usize,
    epoch: Instant,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    next_id: u64,
    slots: HashMap<u64, Arc<Slot>>,
    by_address: HashMap<IpAddr, usize>,
}

impl Inner {
    fn remove(&mut self, id: u64) -> Option<Arc<Slot>> {
        let slot = self.slots.remove(&id)?;
        if let Some(n) = self.by_address.get_mut(&slot.addr) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.by_address.remove(&slot.addr);
            }
        }
        Some(slot)
    }
}

/// A connection's place in the table; leaving drops it.
#[derive(Debug)]
pub(crate) struct Admitted {
    table: Arc<ConnTable>,
    slot: Arc<Slot>,
}

impl Admitted {
    pub(crate) fn slot(&self) -> &Arc<Slot> {
        &self.slot
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.table.lock().remove(self.slot.id);
        metrics::gauge!("buddy_connections_open").decrement(1.0);
    }
}

impl ConnTable {
    /// A table of at most `max` connections, `per_address` from one client address
    /// (0: no limit per address).
    pub(crate) fn new(max: usize, per_address: usize) -> Arc<Self> {
        Arc::new(ConnTable {
            max: max.max(1),
            per_address,
            epoch: Instant::now(),
            inner: Mutex::new(Inner::default()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Open connections.
    pub(crate) fn len(&self) -> usize {
        self.lock().slots.len()
    }

    /// Admits a connection from `addr`, shedding one to make room if the table is full.
    /// Returns its place and why another was shed, or why it is not admitted.
    pub(crate) fn admit(self: &Arc<Self>, addr: IpAddr) -> Result<(Admitted, Option<Shed>), Shed> {
        let addr = canonical(addr);
        let mut inner = self.lock();
        let from_addr = inner.by_address.get(&addr).copied().unwrap_or(0);
        if self.per_address > 0 && from_addr >= self.per_address {
            return Err(Shed::AddressLimit);
        }
        let mut shed = None;
        if inner.slots.len() >= self.max {
            let victim = inner
                .slots
                .values()
                .filter_map(|s| s.rank().map(|r| (r, s.id)))
                .min()
                .map(|((rank, _), id)| (rank, id));
            let Some((rank, id)) = victim else {
                return Err(Shed::Full);
            };
            if let Some(slot) = inner.remove(id) {
                slot.evicted.cancel();
            }
            shed = Some(if rank < 2 {
                Shed::Unauthenticated
            } else {
                Shed::Idle
            });
        }
        inner.next_id += 1;
        let now = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        let slot = Arc::new(Slot {
            id: inner.next_id,
            addr,
            epoch: self.epoch,
            authenticated: AtomicBool::new(false),
            receiving: AtomicU32::new(0),
            serving: AtomicU32::new(0),
            idle_since_ms: AtomicU64::new(now),
            evicted: CancellationToken::new(),
        });
        inner.slots.insert(slot.id, Arc::clone(&slot));
        *inner.by_address.entry(addr).or_default() += 1;
        drop(inner);
        metrics::gauge!("buddy_connections_open").increment(1.0);
        Ok((
            Admitted {
                table: Arc::clone(self),
                slot,
            },
            shed,
        ))
    }
}

/// An IPv4 client seen through an IPv6 socket counts as its IPv4 address.
fn canonical(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(addr, IpAddr::V4),
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    #[test]
    fn a_full_table_sheds_by_rank_and_never_a_connection_being_answered() {
        let table = ConnTable::new(4, 0);
        let admit = |addr| table.admit(addr);
        // A client with a key, idle; one with a key, sending a body; one being answered;
        // one that never showed a key and is sending a body.
        let (keyed_idle, _) = admit(ip(1)).unwrap();
        keyed_idle.slot().authenticate();
        let (keyed_body, _) = admit(ip(1)).unwrap();
        keyed_body.slot().authenticate();
        keyed_body.slot().request_started();
        let (answering, _) = admit(ip(2)).unwrap();
        answering.slot().request_started();
        answering.slot().body_received();
        let (anon_body, _) = admit(ip(3)).unwrap();
        anon_body.slot().request_started();

        let (_new1, shed) = admit(ip(4)).unwrap();
        assert_eq!(shed, Some(Shed::Unauthenticated));
        assert!(anon_body.slot().evicted.is_cancelled());
        // The newcomer (silent, no key) goes before clients with a key.
        let (_new2, shed) = admit(ip(4)).unwrap();
        assert_eq!(shed, Some(Shed::Unauthenticated));
        let (_new3, shed) = admit(ip(4)).unwrap();
        assert_eq!(shed, Some(Shed::Unauthenticated));
        assert!(!keyed_idle.slot().evicted.is_cancelled());
        // Only keyed connections and the one being answered are left besides the newest.
        assert_eq!(table.len(), 4);
    }

    #[test]
    fn idle_clients_with_a_key_go_before_their_bodies_and_the_longest_idle_first() {
        let table = ConnTable::new(3, 0);
        let (old, _) = table.admit(ip(1)).unwrap();
        old.slot().authenticate();
        let (sending, _) = table.admit(ip(1)).unwrap();
        sending.slot().authenticate();
        sending.slot().request_started();
        let (answering, _) = table.admit(ip(2)).unwrap();
        answering.slot().request_started();
        answering.slot().body_received();
        let (_next, shed) = table.admit(ip(5)).unwrap();
        assert_eq!(shed, Some(Shed::Idle));
        assert!(old.slot().evicted.is_cancelled());
        assert!(!sending.slot().evicted.is_cancelled());
    }

    #[test]
    fn when_every_connection_is_being_answered_a_new_one_is_refused() {
        let table = ConnTable::new(2, 0);
        let mut held = Vec::new();
        for n in 0..2 {
            let (place, _) = table.admit(ip(n)).unwrap();
            place.slot().request_started();
            place.slot().body_received();
            held.push(place);
        }
        assert_eq!(table.admit(ip(9)).err(), Some(Shed::Full));
        // The answer goes out to its end: that connection may be shed again.
        held[0].slot().request_ended(true);
        assert!(table.admit(ip(9)).is_ok());
    }

    #[test]
    fn one_address_holds_at_most_its_share_and_leaving_frees_it() {
        let table = ConnTable::new(100, 2);
        let a = table.admit(ip(1)).unwrap();
        let _b = table.admit(ip(1)).unwrap();
        assert_eq!(table.admit(ip(1)).err(), Some(Shed::AddressLimit));
        assert!(table.admit(ip(2)).is_ok());
        // The same client over IPv6 counts as its IPv4 address.
        let mapped = IpAddr::V6(std::net::Ipv4Addr::new(127, 0, 0, 1).to_ipv6_mapped());
        assert_eq!(table.admit(mapped).err(), Some(Shed::AddressLimit));
        drop(a);
        assert!(table.admit(ip(1)).is_ok());
    }

    #[test]
    fn idle_time_counts_from_the_end_of_the_last_request() {
        let table = ConnTable::new(4, 0);
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
        slot.request_ended(true);
        assert!(slot.idle_left(limit).is_some());
        assert!(
            slot.idle_left(Duration::ZERO)
                .is_some_and(|left| left.is_zero())
        );
    }
}
