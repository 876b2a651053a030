"""Policy rules: each refusal has a stable code and plain words; the happy path passes."""

from __future__ import annotations

import pytest

from agent.bank.backend import Account, Action, Card, CustomerView, Money, Payee
from agent.dialogue import policy

VIEW = CustomerView(
    customer_id="cust-001",
    name="Alex Morgan",
    accounts=(
        Account("acc-gbp", "everyday account", "GBP", 523450, 200000),
        Account("acc-jpy", "yen account", "JPY", 250000, 300000),
    ),
    payees=(
        Payee("p-ken-sato", "Ken Sato", "person"),
        Payee("b-aqua-water", "Aqua Water", "biller", 3180, "GBP"),
    ),
    cards=(Card("card-001", "1234", "debit", False), Card("card-002", "5678", "credit", True)),
    spent_today={"acc-gbp": 150000, "acc-jpy": 0},
)


def transfer(minor: int, currency: str = "JPY", **changes: str) -> Action:
    fields = {"account_id": "acc-jpy" if currency == "JPY" else "acc-gbp", "payee_id": "p-ken-sato"}
    fields.update(changes)
    return Action("transfer", "cust-001", amount=Money(minor, currency), **fields)


def code(action: Action, **kwargs: object) -> str | None:
    refusal = policy.check(action, VIEW, require_confirmation=False, **kwargs)  # type: ignore[arg-type]
    if refusal is not None:
        assert refusal.code in policy.REASON_CODES
        assert refusal.reason.endswith(".") and refusal.reason[0].isupper()
    return refusal.code if refusal else None


def test_a_valid_transfer_passes() -> None:
    assert code(transfer(5000)) is None
    assert (
        code(Action("bill_payment", "cust-001", "acc-gbp", "b-aqua-water", Money(3180, "GBP")))
        is None
    )


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        (transfer(-5000), "non_positive_amount"),
        (transfer(0), "non_positive_amount"),
        (transfer(10000, "CHF", account_id="acc-gbp"), "unsupported_currency"),
        (transfer(10000, "USD", account_id="acc-gbp"), "currency_mismatch"),
        (transfer(10000, "EUR", account_id="acc-nope"), "no_account_in_currency"),
        (transfer(10000, account_id="acc-002-jpy"), "unknown_account"),
        # another customer's payee, an invented account number, a biller as a person
        (transfer(5000, payee_id="p2-taro-yamamoto"), "unknown_payee"),
        (transfer(5000, payee_id="999"), "unknown_payee"),
        (transfer(5000, payee_id="b-aqua-water"), "unknown_payee"),
        (transfer(250001), "insufficient_funds"),
        (transfer(60000, "GBP"), "daily_limit"),  # 1,500 of 2,000 pounds already sent today
        (Action("transfer", "cust-002", "acc-jpy", "p-ken-sato", Money(1, "JPY")), "not_owner"),
        (Action("lock_card", "cust-001", card_id="card-999"), "unknown_card"),
        (Action("lock_card", "cust-001", card_id="card-002"), "card_already_locked"),
        (Action("unlock_card", "cust-001", card_id="card-001"), "card_not_locked"),
    ],
)
def test_each_refusal_has_a_reason(action: Action, expected: str) -> None:
    assert code(action) == expected


def test_the_words_say_why() -> None:
    over = policy.check(transfer(60000, "GBP"), VIEW, require_confirmation=False)
    assert over is not None
    assert over.reason == (
        "That's over your daily limit of 2,000 pounds; you can send up to 500 pounds more today."
    )
    poor = policy.check(transfer(250001), VIEW, require_confirmation=False)
    assert poor is not None and "250,000 yen in your yen account" in poor.reason
    francs = policy.check(
        transfer(100, "CHF", account_id="acc-gbp"), VIEW, require_confirmation=False
    )
    assert francs is not None and "Swiss francs" in francs.reason


def test_confirmation_must_be_for_exactly_this_action() -> None:
    action = transfer(5000)
    refusal = policy.check(action, VIEW, action_id="act-1")
    assert refusal is not None and refusal.code == "not_confirmed"
    other = policy.check(action, VIEW, action_id="act-1", confirmed_action_id="act-2")
    assert other is not None and other.code == "not_confirmed"
    assert policy.check(action, VIEW, action_id="act-1", confirmed_action_id="act-1") is None


def test_rules_other_than_confirmation_come_first() -> None:
    refusal = policy.check(transfer(-1), VIEW, action_id="act-1", confirmed_action_id="act-1")
    assert refusal is not None and refusal.code == "non_positive_amount"
