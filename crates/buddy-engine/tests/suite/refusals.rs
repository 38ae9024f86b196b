//! What a provider cannot honour ends the turn before any call, with the reason named:
//! a sampling setting it does not say it sends, or an image or file it cannot take.

use std::sync::Arc;

use buddy_core::{
    Attachment, BoxFuture, CompletionRequest, Message, Provider, ProviderError, Sampling,
    StopReason, TokenStream,
};
use buddy_engine::{Engine, TurnRequest};
use buddy_testkit::{TestToolbox, reply_tokens};

/// A provider that declares nothing beyond its name and its stream: the trait's
/// defaults decide what it refuses.
struct Plain;

impl Provider for Plain {
    fn name(&self) -> &str {
        "plain"
    }

    fn stream<'a>(
        &'a self,
        _: CompletionRequest<'a>,
    ) -> BoxFuture<'a, Result<TokenStream, ProviderError>> {
        Box::pin(async {
            Ok(Box::pin(futures::stream::iter(reply_tokens("Hi.", vec![]))) as TokenStream)
        })
    }
}

async fn turn(request: TurnRequest) -> buddy_engine::TurnOutcome {
    let engine = Engine::new(Arc::new(Plain), Arc::new(TestToolbox::new()));
    engine.run_collect(request).await.1
}

#[tokio::test]
async fn a_provider_refuses_by_default_what_it_does_not_say_it_sends() {
    let plain = turn(TurnRequest::new("m", "hi")).await;
    assert_eq!(plain.reason, StopReason::Completed);

    let hot = turn(TurnRequest::new("m", "hi").with_sampling(Sampling {
        temperature: Some(0.3),
        ..Sampling::default()
    }))
    .await;
    assert_eq!(hot.reason, StopReason::InvalidRequest);
    assert_eq!(hot.stats.model_calls, 0);
    assert!(hot.error.unwrap().contains("does not take `temperature`"));

    let picture = Message::user_with(
        "What is this?",
        vec![Attachment::Image {
            url: "https://example.com/cat.png".into(),
            detail: None,
        }],
    );
    let mut request = TurnRequest::new("m", "").with_history(vec![picture]);
    request.user_message = None;
    let refused = turn(request).await;
    assert_eq!(refused.reason, StopReason::InvalidRequest);
    assert_eq!(refused.stats.model_calls, 0);
    assert!(refused.error.unwrap().contains("does not take images"));

    let out_of_range = turn(TurnRequest::new("m", "hi").with_sampling(Sampling {
        top_p: Some(1.5),
        ..Sampling::default()
    }))
    .await;
    assert!(out_of_range.error.unwrap().contains("top_p = 1.5"));
}
