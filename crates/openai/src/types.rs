//! The OpenAI-compatible JSON bodies vLLM serves, as both the simulator (which writes them) and
//! the load generator (which reads them) need them.

use serde::{Deserialize, Serialize};

/// Token counts of a request, as `usage` reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Usage {
    /// Tokens in the prompt.
    pub prompt_tokens: u64,
    /// Tokens generated.
    #[serde(default)]
    pub completion_tokens: u64,
    /// Their sum.
    #[serde(default)]
    pub total_tokens: u64,
}

impl Usage {
    /// Usage for `prompt` and `completion` tokens.
    pub fn new(prompt: u64, completion: u64) -> Self {
        Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: prompt + completion,
        }
    }
}

/// One choice of a `/v1/completions` response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompletionChoice {
    /// Its index among the `n` samples.
    pub index: u32,
    /// The generated text.
    pub text: String,
    /// `{text_offset, token_logprobs, tokens, top_logprobs}` when asked for, else `null`.
    pub logprobs: Option<serde_json::Value>,
    /// `length`, `stop`, … (`null` in intermediate stream chunks).
    pub finish_reason: Option<String>,
    /// vLLM's extra field: the stop string or token that ended the request, if any.
    #[serde(default)]
    pub stop_reason: Option<serde_json::Value>,
}

/// A `/v1/completions` response, or (with `object: "text_completion"` and partial text) one
/// streamed chunk of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Completion {
    /// `cmpl-…`.
    pub id: String,
    /// `text_completion`.
    pub object: String,
    /// Unix seconds.
    pub created: u64,
    /// The served model name.
    pub model: String,
    /// One choice per prompt (one here).
    pub choices: Vec<CompletionChoice>,
    /// Token counts (in streams, only in the final usage chunk).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// A chat message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// `system`, `user`, `assistant`, …
    pub role: String,
    /// The text.
    pub content: String,
}

/// A function the assistant calls.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionCall {
    /// The function's name.
    pub name: String,
    /// Its arguments, as JSON text.
    pub arguments: String,
}

/// A tool call in an assistant's message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// `chatcmpl-tool-…`.
    pub id: String,
    /// `function`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The call.
    pub function: FunctionCall,
}

/// The assistant's message in a chat response: text, or tool calls (with `content` empty or
/// `null`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AssistantMessage {
    /// `assistant`.
    pub role: String,
    /// The text (`null` beside an automatic tool call).
    pub content: Option<String>,
    /// The calls it makes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
}

/// One choice of a `/v1/chat/completions` response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatChoice {
    /// Its index among the `n` samples.
    pub index: u32,
    /// The assistant's message.
    pub message: AssistantMessage,
    /// `{content: [{token, logprob, bytes, top_logprobs}]}` when asked for, else `null`.
    pub logprobs: Option<serde_json::Value>,
    /// `length`, `stop`, …
    pub finish_reason: Option<String>,
    /// vLLM's extra field.
    #[serde(default)]
    pub stop_reason: Option<serde_json::Value>,
}

/// A `/v1/chat/completions` response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatCompletion {
    /// `chatcmpl-…`.
    pub id: String,
    /// `chat.completion`.
    pub object: String,
    /// Unix seconds.
    pub created: u64,
    /// The served model name.
    pub model: String,
    /// The choices.
    pub choices: Vec<ChatChoice>,
    /// Token counts.
    pub usage: Usage,
}

/// The `delta` of a chat stream chunk.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Delta {
    /// `assistant` in the first chunk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// The new text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
}

/// A choice in a streamed chunk of either endpoint: completions carry `text`, chat `delta`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChunkChoice {
    /// Always 0.
    pub index: u32,
    /// Completion streams: the new text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Chat streams: the new text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta: Option<Delta>,
    /// Set on the last chunk of the choice.
    #[serde(default)]
    pub finish_reason: Option<String>,
}

impl ChunkChoice {
    /// The text this chunk adds, whichever endpoint it came from.
    pub fn content(&self) -> Option<&str> {
        self.text
            .as_deref()
            .or_else(|| self.delta.as_ref().and_then(|d| d.content.as_deref()))
    }
}

/// One `data:` event of a stream from either endpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamChunk {
    /// The request id.
    pub id: String,
    /// `text_completion` or `chat.completion.chunk`.
    pub object: String,
    /// Unix seconds.
    #[serde(default)]
    pub created: u64,
    /// The served model name.
    #[serde(default)]
    pub model: String,
    /// Empty in the final usage chunk.
    #[serde(default)]
    pub choices: Vec<ChunkChoice>,
    /// Present in the final chunk when `stream_options.include_usage` was asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// One entry of `GET /v1/models`. Only `id` is required when reading: servers and gateways
/// differ in what else they send (some omit `created` or `owned_by`), and none of it is
/// needed to pick a model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelCard {
    /// The served model name.
    pub id: String,
    /// `model`.
    #[serde(default)]
    pub object: String,
    /// Unix seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<u64>,
    /// `vllm`.
    #[serde(default)]
    pub owned_by: String,
    /// The model path or id it was loaded from.
    #[serde(default)]
    pub root: Option<String>,
    /// vLLM's extra field: the context window.
    #[serde(default)]
    pub max_model_len: Option<u64>,
}

/// `GET /v1/models`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelList {
    /// `list`.
    #[serde(default)]
    pub object: String,
    /// The models.
    pub data: Vec<ModelCard>,
}

/// The body of an error response: `{"error": {...}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

/// What went wrong.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorDetail {
    /// A sentence for humans.
    pub message: String,
    /// `BadRequestError`, `NotFoundError`, `InternalServerError`, …
    #[serde(rename = "type")]
    pub kind: String,
    /// The request field at fault, when one is.
    pub param: Option<String>,
    /// The HTTP status.
    pub code: u16,
}

impl ErrorBody {
    /// An error body.
    pub fn new(code: u16, kind: &str, message: impl Into<String>, param: Option<&str>) -> Self {
        ErrorBody {
            error: ErrorDetail {
                message: message.into(),
                kind: kind.to_owned(),
                param: param.map(str::to_owned),
                code,
            },
        }
    }
}

/// A `/v1/completions` request as a client sends it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompletionRequest<'a> {
    /// The served model name.
    pub model: &'a str,
    /// The prompt.
    pub prompt: &'a str,
    /// The output cap.
    pub max_tokens: u32,
    /// Sampling temperature.
    pub temperature: f64,
    /// Stream the response as server-sent events.
    pub stream: bool,
    /// Ask for a final usage chunk when streaming.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream_options: Option<StreamOptions>,
    /// vLLM's extension: keep generating past end-of-sequence.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ignore_eos: Option<bool>,
}

/// A `/v1/chat/completions` request as a client sends it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatRequest<'a> {
    /// The served model name.
    pub model: &'a str,
    /// The conversation.
    pub messages: Vec<ChatMessage>,
    /// The output cap.
    pub max_tokens: u32,
    /// Sampling temperature.
    pub temperature: f64,
    /// Stream the response as server-sent events.
    pub stream: bool,
    /// Ask for a final usage chunk when streaming.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream_options: Option<StreamOptions>,
    /// vLLM's extension: keep generating past end-of-sequence.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ignore_eos: Option<bool>,
}

/// `stream_options`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamOptions {
    /// Send a final chunk with `usage`.
    pub include_usage: bool,
}
