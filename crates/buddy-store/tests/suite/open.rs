//! `buddy_store::open` on PostgreSQL: both schemes reach the same store (the SQLite
//! side and the location errors are unit tests beside `open`).

use buddy_store::{StoreLocation, open};

use super::postgres_url;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_reaches_postgres_by_either_scheme_and_reads_it_back() {
    let url = postgres_url();
    let opened = open(&url).await.unwrap();
    assert!(
        opened.shown.starts_with("PostgreSQL, instance "),
        "{}",
        opened.shown
    );
    let id = opened.store.create_conversation("open-test").await.unwrap();
    let other = url.replacen("postgres://", "postgresql://", 1);
    let reader = StoreLocation::parse(&other)
        .unwrap()
        .open_read_only()
        .await
        .unwrap();
    assert!(reader.store.get_conversation(&id).await.unwrap().is_some());
}
