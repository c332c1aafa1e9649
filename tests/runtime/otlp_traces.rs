//! The spans of an OTLP/HTTP protobuf trace export, as the OpenTelemetry
//! .NET SDK posts them to `/v1/traces`: `ExportTraceServiceRequest` of
//! opentelemetry-proto (`collector/trace/v1/trace_service.proto`,
//! `trace/v1/trace.proto`; field numbers read from the official protos),
//! only the fields the trace-context scenario reads, decoded with prost.

use clrprof_sampler::otlp::proto::{KeyValue, Resource};
use prost::Message;
use std::collections::HashMap;

#[derive(Clone, PartialEq, Message)]
struct ExportTraceServiceRequest {
    #[prost(message, repeated, tag = "1")]
    resource_spans: Vec<ResourceSpans>,
}

#[derive(Clone, PartialEq, Message)]
struct ResourceSpans {
    #[prost(message, optional, tag = "1")]
    resource: Option<Resource>,
    #[prost(message, repeated, tag = "2")]
    scope_spans: Vec<ScopeSpans>,
}

#[derive(Clone, PartialEq, Message)]
struct ScopeSpans {
    #[prost(message, repeated, tag = "2")]
    spans: Vec<RawSpan>,
}

#[derive(Clone, PartialEq, Message)]
struct RawSpan {
    #[prost(bytes = "vec", tag = "1")]
    trace_id: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    span_id: Vec<u8>,
    #[prost(bytes = "vec", tag = "4")]
    parent_span_id: Vec<u8>,
    #[prost(string, tag = "5")]
    name: String,
    #[prost(int32, tag = "6")]
    kind: i32,
    #[prost(fixed64, tag = "7")]
    start_time_unix_nano: u64,
    #[prost(fixed64, tag = "8")]
    end_time_unix_nano: u64,
    #[prost(message, repeated, tag = "9")]
    attributes: Vec<KeyValue>,
}

/// One span, ids in lowercase hex.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Span {
    pub trace: String,
    pub span: String,
    /// The parent span's id, `None` for a root.
    pub parent: Option<String>,
    pub name: String,
    /// `SPAN_KIND_SERVER` is 2.
    pub kind: i32,
    pub start: u64,
    pub end: u64,
    /// The `http.route` attribute, when set.
    pub route: Option<String>,
    /// The resource's `service.name`.
    pub service: Option<String>,
}

/// The spans of one request body (gzip or not, as `content-encoding` says).
pub fn decode(body: &[u8], gzip: bool) -> Result<Vec<Span>, String> {
    use std::io::Read;
    let mut raw = Vec::new();
    let body = if gzip {
        flate2::read::GzDecoder::new(body)
            .read_to_end(&mut raw)
            .map_err(|e| format!("a trace export said gzip but is not: {e}"))?;
        &raw[..]
    } else {
        body
    };
    let request = ExportTraceServiceRequest::decode(body)
        .map_err(|e| format!("a trace export does not decode: {e}"))?;
    let mut out = Vec::new();
    for rs in &request.resource_spans {
        let service = rs.resource.as_ref().and_then(|r| {
            r.attributes
                .iter()
                .find(|a| a.key == "service.name")
                .and_then(|a| a.value.as_ref()?.as_str().map(str::to_string))
        });
        for s in rs.scope_spans.iter().flat_map(|s| &s.spans) {
            let route = s
                .attributes
                .iter()
                .find(|a| a.key == "http.route")
                .and_then(|a| a.value.as_ref()?.as_str().map(str::to_string));
            out.push(Span {
                trace: clrprof::context::hex(&s.trace_id),
                span: clrprof::context::hex(&s.span_id),
                parent: (!s.parent_span_id.is_empty())
                    .then(|| clrprof::context::hex(&s.parent_span_id)),
                name: s.name.clone(),
                kind: s.kind,
                start: s.start_time_unix_nano,
                end: s.end_time_unix_nano,
                route,
                service: service.clone(),
            });
        }
    }
    Ok(out)
}

/// Spans by id.
pub fn by_id(spans: Vec<Span>) -> HashMap<String, Span> {
    spans.into_iter().map(|s| (s.span.clone(), s)).collect()
}
