//! [`string_newtype!`](crate::string_newtype): the one definition of a validated string
//! newtype, used by the identifiers here, the control plane's Kubernetes names and the data
//! plane's interface and namespace names.

/// Defines a validated string newtype: a `String` checked once, at the boundary.
///
/// ```
/// # fn check(s: &str) -> Result<(), std::num::ParseIntError> { s.parse::<u8>().map(drop) }
/// liqo_types::string_newtype! {
///     /// A small number, as text.
///     pub struct Small;
///     error = std::num::ParseIntError;
///     check = check;
/// }
/// assert_eq!("42".parse::<Small>().unwrap().as_str(), "42");
/// assert!("300".parse::<Small>().is_err());
/// ```
///
/// It derives `Debug`, `Clone`, `PartialEq`, `Eq`, `PartialOrd`, `Ord`, `Hash`, and defines
/// `as_str`, `TryFrom<String>` and `FromStr` (both run `check`, whose error converts into
/// `error` with `?`), `From<T> for String`, `AsRef<str>`, `Display` (the string itself), and
/// serde through `TryFrom<String>`/`Into<String>` (deserializing checks too; the crate using
/// it depends on `serde` with `derive`). `check` is a path to, or a closure of,
/// `fn(&str) -> Result<(), E>`. The field stays private to the module that invokes the macro,
/// which adds anything else (a maximum length, `TryFrom<&str>`, a JSON schema) itself.
#[macro_export]
macro_rules! string_newtype {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident;
        error = $error:ty;
        check = $check:expr;
    ) => {
        $(#[$meta])*
        #[derive(
            Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash,
            ::serde::Serialize, ::serde::Deserialize,
        )]
        #[serde(try_from = "String", into = "String")]
        $vis struct $name(String);

        impl $name {
            /// The value as a string slice.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl ::std::convert::TryFrom<String> for $name {
            type Error = $error;

            fn try_from(s: String) -> ::std::result::Result<Self, Self::Error> {
                ($check)(s.as_str())?;
                Ok(Self(s))
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = $error;

            fn from_str(s: &str) -> ::std::result::Result<Self, Self::Err> {
                <Self as ::std::convert::TryFrom<String>>::try_from(s.to_owned())
            }
        }

        impl ::std::convert::From<$name> for String {
            fn from(value: $name) -> String {
                value.0
            }
        }

        impl ::std::convert::AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}
