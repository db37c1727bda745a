//! The subset of gnostic's `openapi.v2` protobuf messages (`openapiv2/OpenAPIv2.proto` of
//! github.com/google/gnostic-models) that Setpoint's v2 document uses, with the upstream
//! field numbers. Fields never set here are left out: decoders skip what they do not know,
//! and an absent field reads as its default either way.
//!
//! Vendor extensions (`x-…`) and free-form values (`default`, `enum`, `example`) are
//! [`NamedAny`]/[`Any`] with the value as YAML text in `Any.yaml`, which is how gnostic stores
//! them and what kubectl parses; JSON text is valid YAML.

/// `openapi.v2.Document`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Document {
    #[prost(string, tag = "1")]
    pub(super) swagger: String,
    #[prost(message, optional, tag = "2")]
    pub(super) info: Option<Info>,
    #[prost(string, repeated, tag = "5")]
    pub(super) schemes: Vec<String>,
    #[prost(string, repeated, tag = "6")]
    pub(super) consumes: Vec<String>,
    #[prost(string, repeated, tag = "7")]
    pub(super) produces: Vec<String>,
    #[prost(message, optional, tag = "8")]
    pub(super) paths: Option<Paths>,
    #[prost(message, optional, tag = "9")]
    pub(super) definitions: Option<Definitions>,
}

/// `openapi.v2.Info`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Info {
    #[prost(string, tag = "1")]
    pub(super) title: String,
    #[prost(string, tag = "2")]
    pub(super) version: String,
}

/// `openapi.v2.Paths`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Paths {
    #[prost(message, repeated, tag = "2")]
    pub(super) path: Vec<NamedPathItem>,
}

/// `openapi.v2.NamedPathItem`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct NamedPathItem {
    #[prost(string, tag = "1")]
    pub(super) name: String,
    #[prost(message, optional, tag = "2")]
    pub(super) value: Option<PathItem>,
}

/// `openapi.v2.PathItem`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct PathItem {
    #[prost(message, optional, tag = "2")]
    pub(super) get: Option<Operation>,
    #[prost(message, optional, tag = "3")]
    pub(super) put: Option<Operation>,
    #[prost(message, optional, tag = "4")]
    pub(super) post: Option<Operation>,
    #[prost(message, optional, tag = "5")]
    pub(super) delete: Option<Operation>,
    #[prost(message, optional, tag = "8")]
    pub(super) patch: Option<Operation>,
}

/// `openapi.v2.Operation`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Operation {
    #[prost(string, repeated, tag = "1")]
    pub(super) tags: Vec<String>,
    #[prost(string, tag = "3")]
    pub(super) description: String,
    #[prost(string, tag = "5")]
    pub(super) operation_id: String,
    #[prost(string, repeated, tag = "6")]
    pub(super) produces: Vec<String>,
    #[prost(string, repeated, tag = "7")]
    pub(super) consumes: Vec<String>,
    #[prost(message, repeated, tag = "8")]
    pub(super) parameters: Vec<ParametersItem>,
    #[prost(message, optional, tag = "9")]
    pub(super) responses: Option<Responses>,
    #[prost(string, repeated, tag = "10")]
    pub(super) schemes: Vec<String>,
    #[prost(message, repeated, tag = "13")]
    pub(super) vendor_extension: Vec<NamedAny>,
}

/// `openapi.v2.ParametersItem` (only its `parameter` case; `json_reference` is field 2).
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct ParametersItem {
    #[prost(oneof = "parameters_item::Oneof", tags = "1")]
    pub(super) oneof: Option<parameters_item::Oneof>,
}

pub(super) mod parameters_item {
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub(in super::super) enum Oneof {
        #[prost(message, tag = "1")]
        Parameter(super::Parameter),
    }
}

/// `openapi.v2.Parameter`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Parameter {
    #[prost(oneof = "parameter::Oneof", tags = "1, 2")]
    pub(super) oneof: Option<parameter::Oneof>,
}

pub(super) mod parameter {
    #[allow(clippy::large_enum_variant)] // mirrors the proto; built once per document
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub(in super::super) enum Oneof {
        #[prost(message, tag = "1")]
        BodyParameter(super::BodyParameter),
        #[prost(message, tag = "2")]
        NonBodyParameter(super::NonBodyParameter),
    }
}

/// `openapi.v2.BodyParameter`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct BodyParameter {
    #[prost(string, tag = "1")]
    pub(super) description: String,
    #[prost(string, tag = "2")]
    pub(super) name: String,
    #[prost(string, tag = "3")]
    pub(super) r#in: String,
    #[prost(bool, tag = "4")]
    pub(super) required: bool,
    #[prost(message, optional, tag = "5")]
    pub(super) schema: Option<Schema>,
}

/// `openapi.v2.NonBodyParameter` (its header and form-data cases, fields 1 and 2, unused).
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct NonBodyParameter {
    #[prost(oneof = "non_body_parameter::Oneof", tags = "3, 4")]
    pub(super) oneof: Option<non_body_parameter::Oneof>,
}

pub(super) mod non_body_parameter {
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub(in super::super) enum Oneof {
        #[prost(message, tag = "3")]
        QueryParameterSubSchema(super::QueryParameterSubSchema),
        #[prost(message, tag = "4")]
        PathParameterSubSchema(super::PathParameterSubSchema),
    }
}

/// `openapi.v2.QueryParameterSubSchema`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct QueryParameterSubSchema {
    #[prost(bool, tag = "1")]
    pub(super) required: bool,
    #[prost(string, tag = "2")]
    pub(super) r#in: String,
    #[prost(string, tag = "3")]
    pub(super) description: String,
    #[prost(string, tag = "4")]
    pub(super) name: String,
    #[prost(string, tag = "6")]
    pub(super) r#type: String,
    #[prost(bool, tag = "20")]
    pub(super) unique_items: bool,
}

/// `openapi.v2.PathParameterSubSchema`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct PathParameterSubSchema {
    #[prost(bool, tag = "1")]
    pub(super) required: bool,
    #[prost(string, tag = "2")]
    pub(super) r#in: String,
    #[prost(string, tag = "3")]
    pub(super) description: String,
    #[prost(string, tag = "4")]
    pub(super) name: String,
    #[prost(string, tag = "5")]
    pub(super) r#type: String,
    #[prost(bool, tag = "19")]
    pub(super) unique_items: bool,
}

/// `openapi.v2.Responses`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Responses {
    #[prost(message, repeated, tag = "1")]
    pub(super) response_code: Vec<NamedResponseValue>,
}

/// `openapi.v2.NamedResponseValue`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct NamedResponseValue {
    #[prost(string, tag = "1")]
    pub(super) name: String,
    #[prost(message, optional, tag = "2")]
    pub(super) value: Option<ResponseValue>,
}

/// `openapi.v2.ResponseValue` (only its `response` case; `json_reference` is field 2).
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct ResponseValue {
    #[prost(oneof = "response_value::Oneof", tags = "1")]
    pub(super) oneof: Option<response_value::Oneof>,
}

pub(super) mod response_value {
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub(in super::super) enum Oneof {
        #[prost(message, tag = "1")]
        Response(super::Response),
    }
}

/// `openapi.v2.Response`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Response {
    #[prost(string, tag = "1")]
    pub(super) description: String,
    #[prost(message, optional, tag = "2")]
    pub(super) schema: Option<SchemaItem>,
}

/// `openapi.v2.SchemaItem` (only its `schema` case; `file_schema` is field 2).
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct SchemaItem {
    #[prost(oneof = "schema_item::Oneof", tags = "1")]
    pub(super) oneof: Option<schema_item::Oneof>,
}

pub(super) mod schema_item {
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub(in super::super) enum Oneof {
        #[prost(message, tag = "1")]
        Schema(super::Schema),
    }
}

/// `openapi.v2.Definitions`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Definitions {
    #[prost(message, repeated, tag = "1")]
    pub(super) additional_properties: Vec<NamedSchema>,
}

/// `openapi.v2.NamedSchema`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct NamedSchema {
    #[prost(string, tag = "1")]
    pub(super) name: String,
    #[prost(message, optional, tag = "2")]
    pub(super) value: Option<Schema>,
}

/// `openapi.v2.Schema` (`xml`, `external_docs` and `discriminator` unused).
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Schema {
    #[prost(string, tag = "1")]
    pub(super) xref: String,
    #[prost(string, tag = "2")]
    pub(super) format: String,
    #[prost(string, tag = "3")]
    pub(super) title: String,
    #[prost(string, tag = "4")]
    pub(super) description: String,
    #[prost(message, optional, tag = "5")]
    pub(super) default: Option<Any>,
    #[prost(double, tag = "6")]
    pub(super) multiple_of: f64,
    #[prost(double, tag = "7")]
    pub(super) maximum: f64,
    #[prost(bool, tag = "8")]
    pub(super) exclusive_maximum: bool,
    #[prost(double, tag = "9")]
    pub(super) minimum: f64,
    #[prost(bool, tag = "10")]
    pub(super) exclusive_minimum: bool,
    #[prost(int64, tag = "11")]
    pub(super) max_length: i64,
    #[prost(int64, tag = "12")]
    pub(super) min_length: i64,
    #[prost(string, tag = "13")]
    pub(super) pattern: String,
    #[prost(int64, tag = "14")]
    pub(super) max_items: i64,
    #[prost(int64, tag = "15")]
    pub(super) min_items: i64,
    #[prost(bool, tag = "16")]
    pub(super) unique_items: bool,
    #[prost(int64, tag = "17")]
    pub(super) max_properties: i64,
    #[prost(int64, tag = "18")]
    pub(super) min_properties: i64,
    #[prost(string, repeated, tag = "19")]
    pub(super) required: Vec<String>,
    #[prost(message, repeated, tag = "20")]
    pub(super) r#enum: Vec<Any>,
    #[prost(message, optional, boxed, tag = "21")]
    pub(super) additional_properties: Option<Box<AdditionalPropertiesItem>>,
    #[prost(message, optional, tag = "22")]
    pub(super) r#type: Option<TypeItem>,
    #[prost(message, optional, tag = "23")]
    pub(super) items: Option<ItemsItem>,
    #[prost(message, repeated, tag = "24")]
    pub(super) all_of: Vec<Schema>,
    #[prost(message, optional, tag = "25")]
    pub(super) properties: Option<Properties>,
    #[prost(bool, tag = "27")]
    pub(super) read_only: bool,
    #[prost(message, optional, tag = "30")]
    pub(super) example: Option<Any>,
    #[prost(message, repeated, tag = "31")]
    pub(super) vendor_extension: Vec<NamedAny>,
}

/// `openapi.v2.AdditionalPropertiesItem`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct AdditionalPropertiesItem {
    #[prost(oneof = "additional_properties_item::Oneof", tags = "1, 2")]
    pub(super) oneof: Option<additional_properties_item::Oneof>,
}

pub(super) mod additional_properties_item {
    #[allow(clippy::large_enum_variant)] // mirrors the proto; built once per document
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub(in super::super) enum Oneof {
        #[prost(message, tag = "1")]
        Schema(super::Schema),
        #[prost(bool, tag = "2")]
        Boolean(bool),
    }
}

/// `openapi.v2.TypeItem`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct TypeItem {
    #[prost(string, repeated, tag = "1")]
    pub(super) value: Vec<String>,
}

/// `openapi.v2.ItemsItem`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct ItemsItem {
    #[prost(message, repeated, tag = "1")]
    pub(super) schema: Vec<Schema>,
}

/// `openapi.v2.Properties`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Properties {
    #[prost(message, repeated, tag = "1")]
    pub(super) additional_properties: Vec<NamedSchema>,
}

/// `openapi.v2.NamedAny`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct NamedAny {
    #[prost(string, tag = "1")]
    pub(super) name: String,
    #[prost(message, optional, tag = "2")]
    pub(super) value: Option<Any>,
}

/// `openapi.v2.Any` (its `google.protobuf.Any value`, field 1, unused).
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Any {
    #[prost(string, tag = "2")]
    pub(super) yaml: String,
}
