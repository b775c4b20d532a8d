//! OpenAI-compatible wire formats shared by the simulator and the load generator: the JSON
//! bodies of `/v1/completions`, `/v1/chat/completions` and `/v1/models`, the error shape, and
//! an incremental decoder for server-sent-event streams.
//!
//! ```
//! use inferscale_openai::{SseDecoder, StreamChunk};
//! let mut decoder = SseDecoder::default();
//! let mut events = Vec::new();
//! decoder.feed(b"data: {\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"choices\":[{\"index\":0,\"text\":\" hi\",\"finish_reason\":null}]}\n\n", &mut events)?;
//! let chunk: StreamChunk = serde_json::from_str(&events[0].data).unwrap();
//! assert_eq!(chunk.choices[0].content(), Some(" hi"));
//! # Ok::<(), inferscale_openai::SseError>(())
//! ```

pub mod json;
mod sse;
mod types;

pub use sse::{SseDecoder, SseError, SseEvent};
pub use types::{
    AssistantMessage, ChatChoice, ChatCompletion, ChatMessage, ChatRequest, ChunkChoice,
    Completion, CompletionChoice, CompletionRequest, Delta, ErrorBody, ErrorDetail, FunctionCall,
    ModelCard, ModelList, StreamChunk, StreamOptions, ToolCall, Usage,
};
