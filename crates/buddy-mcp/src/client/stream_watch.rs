//! A Streamable HTTP client that tells when its first attempt to open the session's
//! event stream (the `GET`) has settled. A 2025-11-25 server may send a request of its
//! own (`elicitation/create` without a related request) on that stream only, and drops
//! it when the stream is not open yet: a call made at once after the handshake could
//! wait forever for an answer to a question that never arrived.

use std::collections::HashMap;
use std::sync::Arc;

use futures::stream::BoxStream;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
};
use sse_stream::Sse;
use tokio::sync::watch;

/// `C`, with a flag raised once a `GET` for the event stream has been answered (opened
/// or refused).
#[derive(Clone)]
pub(crate) struct StreamWatch<C> {
    inner: C,
    settled: Arc<watch::Sender<bool>>,
}

impl<C> StreamWatch<C> {
    /// `inner`, watched; the receiver sees `true` once the event stream's first `GET`
    /// has settled.
    pub(crate) fn new(inner: C) -> (Self, watch::Receiver<bool>) {
        let (settled, seen) = watch::channel(false);
        let watched = StreamWatch {
            inner,
            settled: Arc::new(settled),
        };
        (watched, seen)
    }

    fn settle(&self) {
        self.settled.send_replace(true);
    }
}

type Events = BoxStream<'static, Result<Sse, SseError>>;

impl<C: StreamableHttpClient + Sync> StreamableHttpClient for StreamWatch<C> {
    type Error = C::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.inner
            .post_message(uri, message, session_id, auth_header, custom_headers)
            .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.inner
            .post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        self.inner
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<Events, StreamableHttpError<Self::Error>> {
        let opened = self
            .inner
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await;
        self.settle();
        opened
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<Events, StreamableHttpError<Self::Error>> {
        let opened = self
            .inner
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await;
        self.settle();
        opened
    }
}
