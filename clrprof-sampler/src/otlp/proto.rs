//! The OTLP profiles messages clrprof sends, written from the field numbers
//! of opentelemetry-proto 1.11.0: `opentelemetry/proto/profiles/v1development/profiles.proto`,
//! `collector/profiles/v1development/profiles_service.proto`,
//! `common/v1/common.proto` and `resource/v1/resource.proto`. Only the
//! fields clrprof writes or reads are declared (prost skips the others when
//! decoding); each field keeps its `.proto` name and number.

use prost::{Message, Oneof};

/// `collector.profiles.v1development.ExportProfilesServiceRequest`.
#[derive(Clone, PartialEq, Message)]
pub struct ExportProfilesServiceRequest {
    /// `resource_profiles = 1`.
    #[prost(message, repeated, tag = "1")]
    pub resource_profiles: Vec<ResourceProfiles>,
    /// `dictionary = 2`: the tables every profile of the request indexes.
    #[prost(message, optional, tag = "2")]
    pub dictionary: Option<ProfilesDictionary>,
}

/// `collector.profiles.v1development.ExportProfilesServiceResponse`.
#[derive(Clone, PartialEq, Message)]
pub struct ExportProfilesServiceResponse {
    /// `partial_success = 1`.
    #[prost(message, optional, tag = "1")]
    pub partial_success: Option<ExportProfilesPartialSuccess>,
}

/// `collector.profiles.v1development.ExportProfilesPartialSuccess`.
#[derive(Clone, PartialEq, Message)]
pub struct ExportProfilesPartialSuccess {
    /// `rejected_profiles = 1`.
    #[prost(int64, tag = "1")]
    pub rejected_profiles: i64,
    /// `error_message = 2`.
    #[prost(string, tag = "2")]
    pub error_message: String,
}

/// `profiles.v1development.ProfilesDictionary`.
#[derive(Clone, PartialEq, Message)]
pub struct ProfilesDictionary {
    /// `mapping_table = 1`.
    #[prost(message, repeated, tag = "1")]
    pub mapping_table: Vec<Mapping>,
    /// `location_table = 2`.
    #[prost(message, repeated, tag = "2")]
    pub location_table: Vec<Location>,
    /// `function_table = 3`.
    #[prost(message, repeated, tag = "3")]
    pub function_table: Vec<Function>,
    /// `link_table = 4`.
    #[prost(message, repeated, tag = "4")]
    pub link_table: Vec<Link>,
    /// `string_table = 5`.
    #[prost(string, repeated, tag = "5")]
    pub string_table: Vec<String>,
    /// `attribute_table = 6`.
    #[prost(message, repeated, tag = "6")]
    pub attribute_table: Vec<KeyValueAndUnit>,
    /// `stack_table = 7`.
    #[prost(message, repeated, tag = "7")]
    pub stack_table: Vec<Stack>,
}

/// `profiles.v1development.ResourceProfiles`.
#[derive(Clone, PartialEq, Message)]
pub struct ResourceProfiles {
    /// `resource = 1`.
    #[prost(message, optional, tag = "1")]
    pub resource: Option<Resource>,
    /// `scope_profiles = 2`.
    #[prost(message, repeated, tag = "2")]
    pub scope_profiles: Vec<ScopeProfiles>,
    /// `schema_url = 3`.
    #[prost(string, tag = "3")]
    pub schema_url: String,
}

/// `profiles.v1development.ScopeProfiles`.
#[derive(Clone, PartialEq, Message)]
pub struct ScopeProfiles {
    /// `scope = 1`.
    #[prost(message, optional, tag = "1")]
    pub scope: Option<InstrumentationScope>,
    /// `profiles = 2`.
    #[prost(message, repeated, tag = "2")]
    pub profiles: Vec<Profile>,
    /// `schema_url = 3`.
    #[prost(string, tag = "3")]
    pub schema_url: String,
}

/// `profiles.v1development.Profile`.
#[derive(Clone, PartialEq, Message)]
pub struct Profile {
    /// `sample_type = 1`: the one type and unit of every sample's values.
    #[prost(message, optional, tag = "1")]
    pub sample_type: Option<ValueType>,
    /// `samples = 2`.
    #[prost(message, repeated, tag = "2")]
    pub samples: Vec<Sample>,
    /// `time_unix_nano = 3` (fixed64).
    #[prost(fixed64, tag = "3")]
    pub time_unix_nano: u64,
    /// `duration_nano = 4`.
    #[prost(uint64, tag = "4")]
    pub duration_nano: u64,
    /// `period_type = 5`.
    #[prost(message, optional, tag = "5")]
    pub period_type: Option<ValueType>,
    /// `period = 6`.
    #[prost(int64, tag = "6")]
    pub period: i64,
    /// `profile_id = 7`: 16 bytes, not all zero.
    #[prost(bytes = "vec", tag = "7")]
    pub profile_id: Vec<u8>,
    /// `dropped_attributes_count = 8`.
    #[prost(uint32, tag = "8")]
    pub dropped_attributes_count: u32,
    /// `attribute_indices = 11`.
    #[prost(int32, repeated, tag = "11")]
    pub attribute_indices: Vec<i32>,
}

/// `profiles.v1development.Link`.
#[derive(Clone, PartialEq, Eq, Hash, Message)]
pub struct Link {
    /// `trace_id = 1`: 16 bytes.
    #[prost(bytes = "vec", tag = "1")]
    pub trace_id: Vec<u8>,
    /// `span_id = 2`: 8 bytes.
    #[prost(bytes = "vec", tag = "2")]
    pub span_id: Vec<u8>,
}

/// `profiles.v1development.ValueType`.
#[derive(Clone, PartialEq, Message)]
pub struct ValueType {
    /// `type_strindex = 1`.
    #[prost(int32, tag = "1")]
    pub type_strindex: i32,
    /// `unit_strindex = 2`.
    #[prost(int32, tag = "2")]
    pub unit_strindex: i32,
}

/// `profiles.v1development.Sample`.
#[derive(Clone, PartialEq, Message)]
pub struct Sample {
    /// `stack_index = 1`.
    #[prost(int32, tag = "1")]
    pub stack_index: i32,
    /// `attribute_indices = 2`.
    #[prost(int32, repeated, tag = "2")]
    pub attribute_indices: Vec<i32>,
    /// `link_index = 3` (0: no link).
    #[prost(int32, tag = "3")]
    pub link_index: i32,
    /// `values = 4`.
    #[prost(int64, repeated, tag = "4")]
    pub values: Vec<i64>,
    /// `timestamps_unix_nano = 5` (fixed64).
    #[prost(fixed64, repeated, tag = "5")]
    pub timestamps_unix_nano: Vec<u64>,
}

/// `profiles.v1development.Mapping`.
#[derive(Clone, PartialEq, Message)]
pub struct Mapping {
    /// `memory_start = 1`.
    #[prost(uint64, tag = "1")]
    pub memory_start: u64,
    /// `memory_limit = 2`.
    #[prost(uint64, tag = "2")]
    pub memory_limit: u64,
    /// `file_offset = 3`.
    #[prost(uint64, tag = "3")]
    pub file_offset: u64,
    /// `filename_strindex = 4`.
    #[prost(int32, tag = "4")]
    pub filename_strindex: i32,
    /// `attribute_indices = 5`.
    #[prost(int32, repeated, tag = "5")]
    pub attribute_indices: Vec<i32>,
}

/// `profiles.v1development.Stack`.
#[derive(Clone, PartialEq, Message)]
pub struct Stack {
    /// `location_indices = 1`: leaf first.
    #[prost(int32, repeated, tag = "1")]
    pub location_indices: Vec<i32>,
}

/// `profiles.v1development.Location`.
#[derive(Clone, PartialEq, Message)]
pub struct Location {
    /// `mapping_index = 1` (0: none).
    #[prost(int32, tag = "1")]
    pub mapping_index: i32,
    /// `address = 2`.
    #[prost(uint64, tag = "2")]
    pub address: u64,
    /// `lines = 3`.
    #[prost(message, repeated, tag = "3")]
    pub lines: Vec<Line>,
    /// `attribute_indices = 4`.
    #[prost(int32, repeated, tag = "4")]
    pub attribute_indices: Vec<i32>,
}

/// `profiles.v1development.Line`.
#[derive(Clone, PartialEq, Message)]
pub struct Line {
    /// `function_index = 1`.
    #[prost(int32, tag = "1")]
    pub function_index: i32,
    /// `line = 2`.
    #[prost(int64, tag = "2")]
    pub line: i64,
    /// `column = 3`.
    #[prost(int64, tag = "3")]
    pub column: i64,
}

/// `profiles.v1development.Function`.
#[derive(Clone, PartialEq, Message)]
pub struct Function {
    /// `name_strindex = 1`.
    #[prost(int32, tag = "1")]
    pub name_strindex: i32,
    /// `system_name_strindex = 2`.
    #[prost(int32, tag = "2")]
    pub system_name_strindex: i32,
    /// `filename_strindex = 3`.
    #[prost(int32, tag = "3")]
    pub filename_strindex: i32,
    /// `start_line = 4`.
    #[prost(int64, tag = "4")]
    pub start_line: i64,
}

/// `profiles.v1development.KeyValueAndUnit`.
#[derive(Clone, PartialEq, Message)]
pub struct KeyValueAndUnit {
    /// `key_strindex = 1`.
    #[prost(int32, tag = "1")]
    pub key_strindex: i32,
    /// `value = 2`.
    #[prost(message, optional, tag = "2")]
    pub value: Option<AnyValue>,
    /// `unit_strindex = 3`.
    #[prost(int32, tag = "3")]
    pub unit_strindex: i32,
}

/// `resource.v1.Resource`.
#[derive(Clone, PartialEq, Message)]
pub struct Resource {
    /// `attributes = 1`.
    #[prost(message, repeated, tag = "1")]
    pub attributes: Vec<KeyValue>,
    /// `dropped_attributes_count = 2`.
    #[prost(uint32, tag = "2")]
    pub dropped_attributes_count: u32,
}

/// `common.v1.InstrumentationScope`.
#[derive(Clone, PartialEq, Message)]
pub struct InstrumentationScope {
    /// `name = 1`.
    #[prost(string, tag = "1")]
    pub name: String,
    /// `version = 2`.
    #[prost(string, tag = "2")]
    pub version: String,
}

/// `common.v1.KeyValue`.
#[derive(Clone, PartialEq, Message)]
pub struct KeyValue {
    /// `key = 1`.
    #[prost(string, tag = "1")]
    pub key: String,
    /// `value = 2`.
    #[prost(message, optional, tag = "2")]
    pub value: Option<AnyValue>,
}

/// `common.v1.AnyValue`.
#[derive(Clone, PartialEq, Message)]
pub struct AnyValue {
    /// The `value` oneof.
    #[prost(oneof = "Value", tags = "1, 2, 3, 4, 7")]
    pub value: Option<Value>,
}

/// `common.v1.AnyValue.value` (the kinds clrprof writes).
#[derive(Clone, PartialEq, Oneof)]
pub enum Value {
    /// `string_value = 1`.
    #[prost(string, tag = "1")]
    StringValue(String),
    /// `bool_value = 2`.
    #[prost(bool, tag = "2")]
    BoolValue(bool),
    /// `int_value = 3`.
    #[prost(int64, tag = "3")]
    IntValue(i64),
    /// `double_value = 4`.
    #[prost(double, tag = "4")]
    DoubleValue(f64),
    /// `bytes_value = 7`.
    #[prost(bytes = "vec", tag = "7")]
    BytesValue(Vec<u8>),
}

impl AnyValue {
    /// A string value.
    pub fn string(s: impl Into<String>) -> AnyValue {
        AnyValue {
            value: Some(Value::StringValue(s.into())),
        }
    }

    /// An integer value.
    pub fn int(i: i64) -> AnyValue {
        AnyValue {
            value: Some(Value::IntValue(i)),
        }
    }

    /// The string, if the value is one.
    pub fn as_str(&self) -> Option<&str> {
        match &self.value {
            Some(Value::StringValue(s)) => Some(s),
            _ => None,
        }
    }
}
