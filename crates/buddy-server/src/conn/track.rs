//! Following each request of a connection for the table: it started, its body came
//! in, its response went out to its end (or it turned out to read a running turn's
//! events) — whether it showed an accepted key, and, behind a trusted proxy, which
//! client it comes from.

use std::convert::Infallible;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{Request, Response, StatusCode, header};
use futures::future::BoxFuture;
use http_body::{Frame, SizeHint};
use tower::{Service, ServiceExt};

use super::forwarded::client_address;
use super::per_key::Held;
use super::session::Session;
use super::slot::{Shed, Stage};
use super::table::Admitted;
use crate::error::AppError;
use crate::settings::{ApiKey, key_for};

/// Where one request is; dropping it (with the request and its response body) ends it.
#[derive(Debug)]
pub(crate) struct Progress {
    place: Arc<Admitted>,
    stage: Mutex<Stage>,
    /// Its key's hold of a reader, while it reads a running turn.
    reader: Mutex<Option<Held>>,
}

impl Progress {
    fn start(place: Arc<Admitted>) -> Arc<Self> {
        place.slot().request_started();
        Arc::new(Progress {
            place,
            stage: Mutex::new(Stage::Receiving),
            reader: Mutex::new(None),
        })
    }

    /// The request's body is in (or it had none): it is being answered.
    pub(crate) fn body_received(&self) {
        let mut stage = self.stage.lock().unwrap_or_else(PoisonError::into_inner);
        if *stage == Stage::Receiving {
            *stage = Stage::Serving;
            self.place.slot().body_received();
        }
    }

    /// The request reads a running turn's events for `owner`: counted against the key's
    /// readers (429 past its cap) and shed like an idle connection when room is needed.
    pub(crate) fn watch(&self, owner: &str) -> Result<(), AppError> {
        let readers = &self.place.table().readers;
        let held = readers.hold(owner).ok_or_else(|| {
            AppError::TooManyTurns(format!(
                "this key already reads {} running turns at once (max_readers_per_key); \
                 close a reader or retry shortly",
                readers.cap()
            ))
        })?;
        *self.reader.lock().unwrap_or_else(PoisonError::into_inner) = Some(held);
        let mut stage = self.stage.lock().unwrap_or_else(PoisonError::into_inner);
        if *stage == Stage::Serving {
            *stage = Stage::Watching;
            self.place.slot().started_watching();
        }
        Ok(())
    }

    /// The request becomes a WebSocket session of `owner`: it keeps the connection's
    /// place in the table (429 past the key's cap of sessions).
    pub(crate) fn session(&self, owner: &str) -> Result<Session, AppError> {
        let websockets = &self.place.table().websockets;
        let held = websockets.hold(owner).ok_or_else(|| {
            AppError::TooManyTurns(format!(
                "this key already holds {} WebSocket sessions (max_websockets_per_key); close \
                 an idle one or retry shortly",
                websockets.cap()
            ))
        })?;
        Ok(Session::new(Arc::clone(&self.place), held))
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        let stage = *self.stage.lock().unwrap_or_else(PoisonError::into_inner);
        self.place.slot().request_ended(stage);
    }
}

/// The router as one connection serves it: every request is followed in the table.
#[derive(Clone)]
pub(crate) struct Tracked {
    router: Router,
    place: Arc<Admitted>,
    keys: Arc<[ApiKey]>,
    peer: IpAddr,
}

impl Tracked {
    pub(crate) fn new(
        router: Router,
        place: Arc<Admitted>,
        keys: Arc<[ApiKey]>,
        peer: IpAddr,
    ) -> Self {
        Tracked {
            router,
            place,
            keys,
            peer,
        }
    }

    /// Behind a trusted proxy: counts the connection under the client this request
    /// names; `Err` when that client's share holds only connections with a key or
    /// being answered.
    fn follow_client(&self, request: &Request<impl Sized>) -> Result<(), Shed> {
        if !self.place.slot().from_proxy {
            return Ok(());
        }
        let table = self.place.table();
        let client = client_address(self.peer, request.headers(), &table.trusted);
        if let Some(shed) = table.move_to(self.place.slot(), client)? {
            metrics::counter!("buddy_connections_shed_total", "reason" => shed.as_str())
                .increment(1);
        }
        Ok(())
    }
}

impl<B> Service<Request<B>> for Tracked
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        if let Err(why) = self.follow_client(&request) {
            metrics::counter!("buddy_connections_shed_total", "reason" => why.as_str())
                .increment(1);
            return Box::pin(async move { Ok(refused(why)) });
        }
        if key_for(request.headers(), &self.keys).is_some() {
            self.place.slot().authenticate();
        }
        let progress = Progress::start(Arc::clone(&self.place));
        let mut request = request.map(Body::new);
        request.extensions_mut().insert(Arc::clone(&progress));
        let router = self.router.clone();
        Box::pin(async move {
            let response = router.oneshot(request).await?;
            // Answered, whatever became of its body.
            progress.body_received();
            Ok(response.map(|body| {
                Body::new(Reported {
                    inner: body,
                    _progress: progress,
                })
            }))
        })
    }
}

/// A 503 for a request whose client may not hold another connection.
fn refused(why: Shed) -> Response<Body> {
    let mut response = Response::new(Body::from(super::refusal(why)));
    *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    headers.insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
    headers.insert(
        header::CONNECTION,
        header::HeaderValue::from_static("close"),
    );
    response
}

/// A response body that ends its request's progress when it is done with.
struct Reported {
    inner: Body,
    _progress: Arc<Progress>,
}

impl http_body::Body for Reported {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
