//! Reading PostgreSQL's answers: a failed statement as a store error.

use crate::error::StoreError;

/// A failed statement; a value that does not decode as its type is a damaged record,
/// not a failure a retry could mend.
pub(super) fn backend(e: sqlx::Error) -> StoreError {
    match e {
        sqlx::Error::ColumnDecode { .. } | sqlx::Error::Decode(_) => {
            StoreError::Corrupt(format!("postgres: {e}"))
        }
        e => StoreError::Backend(format!("postgres: {e}")),
    }
}
