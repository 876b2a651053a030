"""Policy: may this action run? Pure rules over a snapshot of the caller's accounts.

Applied to every action whatever proposed it (the fast path or an LLM): before the
read-back (so the caller is never asked to confirm something that will be refused) and
again, with fresh balances, just before execution, where it also demands that the
caller confirmed exactly this action in this session. The bank re-checks the hard
invariants inside its own transaction as well.

A refusal carries a stable code (for the audit log) and plain words for the caller.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.bank.backend import MONEY_ACTIONS, Action, CustomerView
from agent.dialogue.replies import currency_name, spoken_money

# Currencies the bank can move. An amount in any other is refused.
SUPPORTED_CURRENCIES = frozenset({"GBP", "USD", "EUR", "JPY"})

REASON_CODES = frozenset(
    {
        "not_owner",
        "unsupported_currency",
        "no_account_in_currency",
        "non_positive_amount",
        "unknown_account",
        "currency_mismatch",
        "unknown_payee",
        "insufficient_funds",
        "daily_limit",
        "unknown_card",
        "card_already_locked",
        "card_not_locked",
        "not_confirmed",
    }
)


@dataclass(frozen=True, slots=True)
class Refusal:
    code: str  # one of REASON_CODES
    reason: str  # a sentence the caller hears


def check(
    action: Action,
    view: CustomerView,
    *,
    action_id: str | None = None,
    confirmed_action_id: str | None = None,
    require_confirmation: bool = True,
) -> Refusal | None:
    """None when the action may run; else the first rule it breaks."""
    if action.customer_id != view.customer_id:
        return Refusal("not_owner", "I can only act on your own accounts.")
    refusal = (
        _check_money(action, view) if action.kind in MONEY_ACTIONS else _check_card(action, view)
    )
    if refusal is not None:
        return refusal
    if require_confirmation and (action_id is None or confirmed_action_id != action_id):
        return Refusal(
            "not_confirmed", "I need you to confirm that first, so I haven't done anything."
        )
    return None


def _check_money(action: Action, view: CustomerView) -> Refusal | None:
    amount = action.amount
    if amount is None or amount.minor <= 0:
        return Refusal("non_positive_amount", "The amount has to be more than zero.")
    if amount.currency not in SUPPORTED_CURRENCIES:
        return Refusal(
            "unsupported_currency",
            f"I can't send money in {currency_name(amount.currency)}; "
            "I can use pounds, dollars, euros or yen.",
        )
    account = view.account(action.account_id)
    if account is None:
        if not any(a.currency == amount.currency for a in view.accounts):
            return Refusal(
                "no_account_in_currency",
                f"You don't have an account in {currency_name(amount.currency)}.",
            )
        return Refusal("unknown_account", "That account isn't one of yours.")
    if account.currency != amount.currency:
        return Refusal(
            "currency_mismatch",
            f"Your {account.name} is in {currency_name(account.currency)}, so I can't send "
            f"{currency_name(amount.currency)} from it.",
        )
    payee = view.payee(action.payee_id)
    wanted = "person" if action.kind == "transfer" else "biller"
    if payee is None or payee.kind != wanted:
        return Refusal(
            "unknown_payee",
            "I can only send money to people on your saved payee list."
            if action.kind == "transfer"
            else "I can only pay billers you've already saved.",
        )
    if amount.minor > account.balance_minor:
        return Refusal(
            "insufficient_funds",
            f"That's more than the {spoken_money(account.balance_minor, account.currency)} "
            f"in your {account.name}.",
        )
    spent = view.spent_today.get(account.id, 0)
    if spent + amount.minor > account.daily_limit_minor:
        left = max(account.daily_limit_minor - spent, 0)
        limit = spoken_money(account.daily_limit_minor, account.currency)
        return Refusal(
            "daily_limit",
            f"That's over your daily limit of {limit}; you can send up to "
            f"{spoken_money(left, account.currency)} more today.",
        )
    return None


def _check_card(action: Action, view: CustomerView) -> Refusal | None:
    card = view.card(action.card_id)
    if card is None:
        return Refusal("unknown_card", "That card isn't one of yours.")
    if action.kind == "lock_card" and card.locked:
        return Refusal(
            "card_already_locked", f"Your {card.kind} card ending {card.last4} is already locked."
        )
    if action.kind == "unlock_card" and not card.locked:
        return Refusal(
            "card_not_locked", f"Your {card.kind} card ending {card.last4} isn't locked."
        )
    return None
