//! `kube::Resource` for the types stored in place of a Pod (pure).

/// `kube::Resource` for a type stored in place of a Pod (listed and watched as `/api/v1/pods`),
/// whose `metadata` field is the pod's.
macro_rules! pod_resource {
    ($t:ty) => {
        impl kube::Resource for $t {
            type DynamicType = ();
            type Scope = k8s_openapi::NamespaceResourceScope;

            fn kind(dt: &()) -> std::borrow::Cow<'_, str> {
                <k8s_openapi::api::core::v1::Pod as kube::Resource>::kind(dt)
            }
            fn group(dt: &()) -> std::borrow::Cow<'_, str> {
                <k8s_openapi::api::core::v1::Pod as kube::Resource>::group(dt)
            }
            fn version(dt: &()) -> std::borrow::Cow<'_, str> {
                <k8s_openapi::api::core::v1::Pod as kube::Resource>::version(dt)
            }
            fn api_version(dt: &()) -> std::borrow::Cow<'_, str> {
                <k8s_openapi::api::core::v1::Pod as kube::Resource>::api_version(dt)
            }
            fn plural(dt: &()) -> std::borrow::Cow<'_, str> {
                <k8s_openapi::api::core::v1::Pod as kube::Resource>::plural(dt)
            }
            fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &self.metadata
            }
            fn meta_mut(
                &mut self,
            ) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &mut self.metadata
            }
        }
    };
}
pub(crate) use pod_resource;
