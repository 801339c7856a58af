//! Hand-written schema pieces where the derived ones would let the apiserver accept too much
//! (or would spell out a whole PodSpec).

use k8s_openapi::{
    api::core::v1::NodeSelector,
    apiextensions_apiserver::pkg::apis::apiextensions::v1::{
        JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
    },
    apimachinery::pkg::api::resource::Quantity,
};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde_json::Value;

/// The operators of a core/v1 NodeSelectorRequirement.
pub const NODE_SELECTOR_OPERATORS: [&str; 6] =
    ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"];

/// A core/v1 NodeSelector whose requirements must name a key and a known operator (the core
/// schema leaves `operator` a free string; the scheduler would only fail later).
pub(super) fn node_selector(generator: &mut SchemaGenerator) -> Schema {
    let mut schema = NodeSelector::json_schema(generator);
    if let Some(object) = schema.as_object_mut() {
        object.values_mut().for_each(constrain_requirements);
    }
    schema
}

/// Sets the operator enum and a non-empty key on every NodeSelectorRequirement inside `value`
/// (recognised by its `key` and `operator` properties).
fn constrain_requirements(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let Some(Value::Object(props)) = map.get_mut("properties")
                && props.contains_key("key")
                && props.contains_key("operator")
            {
                if let Some(Value::Object(op)) = props.get_mut("operator") {
                    op.insert("enum".into(), NODE_SELECTOR_OPERATORS.into());
                }
                if let Some(Value::Object(key)) = props.get_mut("key") {
                    key.insert("minLength".into(), 1.into());
                }
            }
            map.values_mut().for_each(constrain_requirements);
        }
        Value::Array(items) => items.iter_mut().for_each(constrain_requirements),
        _ => {}
    }
}

/// An object kept as written (a full core/v1 PodSpec, validated by the apiserver when the real
/// pod is created, not spelled out in the CRD).
pub(super) fn opaque_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// The format of a resource quantity (controller-gen's pattern for `resource.Quantity`).
pub(super) const QUANTITY_PATTERN: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

/// Tidies a CRD schema and its subschemas: descriptions lose the line breaks of the doc
/// comments they come from ("a\nb" → "a b", blank-line paragraphs kept), and quantities
/// (recognised by Quantity's own description) get controller-gen's shape, an integer or a
/// string matching [`QUANTITY_PATTERN`], instead of a page of prose.
pub(super) fn tidy(schema: &mut JSONSchemaProps) {
    if schema.x_kubernetes_int_or_string == Some(true)
        && schema.description.is_some()
        && schema.description == quantity_description()
    {
        schema.description = None;
        schema.pattern = Some(QUANTITY_PATTERN.into());
        schema.any_of = Some(
            ["integer", "string"]
                .map(|type_| JSONSchemaProps {
                    type_: Some(type_.into()),
                    ..Default::default()
                })
                .into(),
        );
    }
    if let Some(text) = &mut schema.description {
        *text = text
            .split("\n\n")
            .map(|paragraph| {
                paragraph
                    .lines()
                    .map(str::trim)
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect::<Vec<_>>()
            .join("\n\n");
    }
    if let Some(properties) = &mut schema.properties {
        properties.values_mut().for_each(tidy);
    }
    match &mut schema.items {
        Some(JSONSchemaPropsOrArray::Schema(items)) => tidy(items),
        Some(JSONSchemaPropsOrArray::Schemas(items)) => items.iter_mut().for_each(tidy),
        None => {}
    }
    if let Some(JSONSchemaPropsOrBool::Schema(additional)) = &mut schema.additional_properties {
        tidy(additional);
    }
}

/// The description k8s-openapi gives Quantity.
fn quantity_description() -> Option<String> {
    let schema = Quantity::json_schema(&mut SchemaGenerator::default());
    schema.get("description")?.as_str().map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_are_reflowed_keeping_paragraphs() {
        let mut schema = JSONSchemaProps {
            description: Some("one\ntwo\n\nthree".into()),
            items: Some(JSONSchemaPropsOrArray::Schema(Box::new(JSONSchemaProps {
                description: Some("four\nfive".into()),
                ..Default::default()
            }))),
            ..Default::default()
        };
        tidy(&mut schema);
        assert_eq!(schema.description.as_deref(), Some("one two\n\nthree"));
        let Some(JSONSchemaPropsOrArray::Schema(items)) = &schema.items else {
            panic!("items kept");
        };
        assert_eq!(items.description.as_deref(), Some("four five"));
    }

    #[test]
    fn quantities_get_a_pattern_instead_of_prose() {
        let mut quantity: JSONSchemaProps = serde_json::from_value(
            Quantity::json_schema(&mut SchemaGenerator::default()).to_value(),
        )
        .unwrap();
        let mut other_int_or_string = JSONSchemaProps {
            description: Some("IntOrString".into()),
            x_kubernetes_int_or_string: Some(true),
            ..Default::default()
        };
        tidy(&mut quantity);
        tidy(&mut other_int_or_string);
        assert_eq!(quantity.description, None);
        assert_eq!(quantity.pattern.as_deref(), Some(QUANTITY_PATTERN));
        assert_eq!(quantity.any_of.as_ref().map(Vec::len), Some(2));
        assert_eq!(other_int_or_string.pattern, None);
    }

    #[test]
    fn requirements_get_enum_and_key_rule() {
        let mut generator = schemars::generate::SchemaSettings::openapi3()
            .with(|s| s.inline_subschemas = true)
            .into_generator();
        let schema = node_selector(&mut generator).to_value();
        let term = &schema["properties"]["nodeSelectorTerms"]["items"]["properties"];
        for list in ["matchExpressions", "matchFields"] {
            let req = &term[list]["items"];
            assert_eq!(req["properties"]["operator"]["enum"][0], "In", "{list}");
            assert_eq!(req["properties"]["operator"]["enum"][5], "Lt", "{list}");
            assert_eq!(req["properties"]["key"]["minLength"], 1, "{list}");
            let required: Vec<_> = req["required"].as_array().unwrap().iter().collect();
            assert!(required.contains(&&Value::from("key")), "{list}");
            assert!(required.contains(&&Value::from("operator")), "{list}");
        }
        assert_eq!(schema["required"][0], "nodeSelectorTerms");
    }
}
