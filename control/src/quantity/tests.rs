use super::*;

const G: i128 = 1_000_000_000;

fn nanos(text: &str) -> i128 {
    Amount::parse(text)
        .unwrap_or_else(|e| panic!("{e}"))
        .nanos()
}

fn problem(text: &str) -> QuantityProblem {
    Amount::parse(text).unwrap_err().problem
}

#[test]
fn plain_numbers() {
    assert_eq!(nanos("0"), 0);
    assert_eq!(nanos("1"), G);
    assert_eq!(nanos("110"), 110 * G);
    assert_eq!(nanos("1.5"), 3 * G / 2);
    assert_eq!(nanos(".5"), G / 2);
    assert_eq!(nanos("5."), 5 * G);
    assert_eq!(nanos("+2"), 2 * G);
    assert_eq!(nanos("-2"), -2 * G);
    assert_eq!(nanos("007"), 7 * G);
    assert_eq!(nanos("1.000000000000000000000000000000000000000000"), G);
}

#[test]
fn decimal_suffixes() {
    assert_eq!(nanos("1n"), 1);
    assert_eq!(nanos("1u"), 1_000);
    assert_eq!(nanos("500m"), G / 2);
    assert_eq!(nanos("2k"), 2_000 * G);
    assert_eq!(nanos("3M"), 3_000_000 * G);
    assert_eq!(nanos("1G"), G * G);
    assert_eq!(nanos("1T"), 1_000 * G * G);
    assert_eq!(nanos("1P"), 1_000_000 * G * G);
    assert_eq!(nanos("1E"), G * G * G);
    assert_eq!(nanos("1.5k"), 1_500 * G);
}

#[test]
fn binary_suffixes() {
    assert_eq!(nanos("1Ki"), 1024 * G);
    assert_eq!(nanos("1Mi"), (1 << 20) * G);
    assert_eq!(nanos("8Gi"), 8 * (1 << 30) * G);
    assert_eq!(nanos("1Ti"), (1 << 40) * G);
    assert_eq!(nanos("1Pi"), (1 << 50) * G);
    assert_eq!(nanos("2Ei"), 2 * (1 << 60) * G);
    assert_eq!(nanos("1.5Gi"), 3 * (1 << 29) * G);
    // kwok's and kubelet's usual forms
    assert_eq!(
        Amount::parse("32761308Ki").unwrap().ceil_scaled(0),
        32761308 * 1024
    );
}

#[test]
fn exponents() {
    assert_eq!(nanos("1e3"), 1_000 * G);
    assert_eq!(nanos("1E3"), 1_000 * G);
    assert_eq!(nanos("1e+3"), 1_000 * G);
    assert_eq!(nanos("25e-2"), G / 4);
    assert_eq!(nanos("1.5e1"), 15 * G);
    assert_eq!(nanos("1e0"), G);
}

#[test]
fn finer_than_nano_rounds_away_from_zero() {
    assert_eq!(nanos("0.1n"), 1);
    assert_eq!(nanos("1e-12"), 1);
    assert_eq!(nanos("-0.1n"), -1);
    assert_eq!(nanos("1e-100"), 1);
    assert_eq!(nanos("0e-100"), 0);
}

#[test]
fn integer_views_round_up_as_kubernetes() {
    let a = Amount::parse("1500u").unwrap(); // 1.5m
    assert_eq!(a.ceil_scaled(-3), 2);
    assert_eq!(a.ceil_scaled(0), 1);
    assert_eq!(Amount::parse("2Gi").unwrap().ceil_scaled(6), 2148); // 2147.48 MB
    assert_eq!(Amount::parse("2G").unwrap().ceil_scaled(6), 2000);
    assert_eq!(Amount::parse("-1500m").unwrap().ceil_scaled(0), -2);
    assert_eq!(Amount::parse("0").unwrap().ceil_scaled(6), 0);
    assert_eq!(Amount::parse("1n").unwrap().ceil_scaled(40), 1);
}

#[test]
fn errors_name_the_quantity() {
    let err = Amount::parse("12x").unwrap_err();
    assert_eq!(err.quantity, "12x");
    assert_eq!(
        err.to_string(),
        "bad quantity \"12x\": has an unknown suffix \"x\" (known: n, u, m, k, M, G, T, P, E, \
         Ki, Mi, Gi, Ti, Pi, Ei, or an exponent such as e3)"
    );
    assert_eq!(problem(""), QuantityProblem::Empty);
    assert_eq!(problem("-"), QuantityProblem::NoDigits);
    assert_eq!(problem("Gi"), QuantityProblem::NoDigits);
    assert_eq!(problem("."), QuantityProblem::NoDigits);
    assert_eq!(problem("1.2.3"), QuantityProblem::TwoPoints);
    assert_eq!(problem("1K"), QuantityProblem::UnknownSuffix("K".into()));
    assert_eq!(problem("1e"), QuantityProblem::UnknownSuffix("e".into()));
    assert_eq!(problem("1e+"), QuantityProblem::UnknownSuffix("e+".into()));
    assert_eq!(problem("1ki"), QuantityProblem::UnknownSuffix("ki".into()));
    assert_eq!(
        problem("1 Gi"),
        QuantityProblem::UnknownSuffix(" Gi".into())
    );
    assert_eq!(problem("1e101"), QuantityProblem::OutOfRange);
    // Zero times any power in range is zero, not an overflow.
    assert_eq!(Amount::parse("0e100").unwrap().nanos(), 0);
    assert_eq!(problem("1e30"), QuantityProblem::OutOfRange);
    assert_eq!(problem(&"9".repeat(39)), QuantityProblem::OutOfRange);
    assert_eq!(
        problem("999999999999999999999Ei"),
        QuantityProblem::OutOfRange
    );
}

#[test]
fn canonical_decimal_form() {
    let q = |n, e| decimal(n, e).0;
    assert_eq!(q(0, -3), "0");
    assert_eq!(q(2400, -3), "2400m");
    assert_eq!(q(3000, -3), "3");
    assert_eq!(q(1_500_000, -3), "1500");
    assert_eq!(q(1536, 6), "1536M");
    assert_eq!(q(2000, 6), "2G");
    assert_eq!(q(99, 0), "99");
    assert_eq!(q(110_000, 0), "110k");
    assert_eq!(q(-2000, -3), "-2");
    assert_eq!(Amount::parse("1.5").unwrap().to_string(), "1500m");
    assert_eq!(Amount::parse("1Ki").unwrap().to_string(), "1024");
    // What it writes reads back as the same amount.
    for (n, e) in [(2400, -3), (1536, 6), (7, 0), (1, -9), (5, 18)] {
        assert_eq!(
            Amount::from_quantity(&decimal(n, e)).unwrap(),
            Amount::scaled(n, e),
            "{n}e{e}"
        );
    }
}

#[test]
fn arithmetic_saturates() {
    let max = Amount::scaled(i128::MAX, 0);
    assert_eq!(max.plus(Amount::scaled(1, 0)), max);
    assert_eq!(
        Amount::ZERO.minus(Amount::scaled(1, -3)).nanos(),
        -1_000_000
    );
}
