//! One store contract, run against SQLite and against PostgreSQL (a throw-away cluster
//! that `scripts/test.sh` starts; without it the PostgreSQL tests fail and say so).

mod contract;
mod coordination;
mod holds_life;
mod open;
mod owner_bytes;
mod private_files;
mod stepwise;

/// The PostgreSQL the test script started.
pub fn postgres_url() -> String {
    std::env::var("BUDDY_TEST_POSTGRES_URL").unwrap_or_else(|_| {
        panic!(
            "BUDDY_TEST_POSTGRES_URL is not set: run the suite with scripts/test.sh, which starts a \
             throw-away PostgreSQL (Debian's postgresql package must be installed; .ci/run installs it)"
        )
    })
}
