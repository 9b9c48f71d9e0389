"""Blackjack: one hand per episode against a dealer who stands on all 17s.

Classic rules: cards 2-10 count their rank, J/Q/K 10, an ace 1 or 11. The player sees one of
the dealer's two cards, hits until satisfied or bust, then the dealer draws to 17 or more.
A natural (ace + ten-value card as the first two cards) pays `blackjack_payout` (3:2 by default)
unless the dealer has one too. The deck is infinite by default (each card drawn independently,
as in Sutton & Barto and Gymnasium's Blackjack); `decks=N` deals from a shuffled shoe of N decks.

Reward, at the end of the hand: +1 win, +`blackjack_payout` natural, 0 push, -1 loss. The same
seed and actions give the same hand.
"""

from __future__ import annotations

import random
import uuid
from typing import Any

from openenv import Environment

try:
    from ..models import BlackjackAction, BlackjackObservation, BlackjackState
except ImportError:  # `uvicorn server.app:app` from the env's folder
    from models import BlackjackAction, BlackjackObservation, BlackjackState  # type: ignore[no-redef]

RANKS = ("A", "2", "3", "4", "5", "6", "7", "8", "9", "10", "J", "Q", "K")
SUITS = ("♠", "♥", "♦", "♣")
_MAX_DECKS = 8


def card_value(card: str) -> int:
    """Value of a card with the ace as 1."""
    rank = card[:-1]
    if rank == "A":
        return 1
    return 10 if rank in ("J", "Q", "K") else int(rank)


def hand_total(cards: list[str]) -> tuple[int, bool]:
    """(best total, whether an ace counts as 11 in it)."""
    total = sum(card_value(c) for c in cards)
    if any(c.startswith("A") for c in cards) and total + 10 <= 21:
        return total + 10, True
    return total, False


def is_natural(cards: list[str]) -> bool:
    return len(cards) == 2 and hand_total(cards)[0] == 21


class BlackjackEnvironment(Environment[BlackjackAction, BlackjackObservation, BlackjackState]):
    """One hand of classic blackjack: hit or stand against a dealer who stands on 17."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    # The whole hand is plain data, the RNG (and so every card still to come) included: a restored
    # hand deals the same cards as the original would.
    SNAPSHOT_ATTRS = (
        "_rng",
        "_episode_id",
        "_seed",
        "_decks",
        "_payout",
        "_shoe",
        "_player",
        "_dealer",
        "_steps",
        "_outcome",
    )

    def __init__(self) -> None:
        self._rng = random.Random()
        self._episode_id = str(uuid.uuid4())
        self._seed: int | None = None
        self._decks = 0
        self._payout = 1.5
        self._shoe: list[str] = []
        self._player: list[str] = []
        self._dealer: list[str] = []
        self._steps = 0
        self._outcome: str | None = None

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        decks: int = 0,
        blackjack_payout: float = 1.5,
        **kwargs: Any,
    ) -> BlackjackObservation:
        """Deal a new hand.

        Args:
            decks: 0 for an infinite deck, else the number of decks in the shuffled shoe (1-8).
            blackjack_payout: what a natural pays (1.5 is 3:2; 1.0 is even money).

        Raises:
            ValueError: `decks` or `blackjack_payout` is out of range.
        """
        if not isinstance(decks, int) or not 0 <= decks <= _MAX_DECKS:
            raise ValueError(f"decks must be an integer from 0 (infinite deck) to {_MAX_DECKS}, got {decks!r}")
        if not isinstance(blackjack_payout, (int, float)) or not 1.0 <= blackjack_payout <= 3.0:
            raise ValueError(f"blackjack_payout must be between 1.0 and 3.0, got {blackjack_payout!r}")
        if seed is not None:
            self._rng = random.Random(seed)
        self._seed = seed
        self._episode_id = episode_id or str(uuid.uuid4())
        self._decks = decks
        self._payout = float(blackjack_payout)
        self._shoe = [r + s for r in RANKS for s in SUITS] * decks
        self._rng.shuffle(self._shoe)
        self._steps = 0
        self._outcome = None
        self._player = [self._draw(), self._draw()]
        self._dealer = [self._draw(), self._draw()]
        return self._observe(reward=None, note="New hand.")

    def step(self, action: BlackjackAction, timeout_s: float | None = None, **kwargs: Any) -> BlackjackObservation:
        """Hit or stand.

        Raises:
            RuntimeError: the hand is over (call reset to deal a new one).
        """
        if self._outcome is not None or not self._player:
            raise RuntimeError("the hand is over; call reset() to deal a new one")
        self._steps += 1
        if action.action == "hit":
            card = self._draw()
            self._player.append(card)
            total, _ = hand_total(self._player)
            if total > 21:
                return self._finish("loss", f"You hit and draw {card}: {total}, bust.")
            return self._observe(reward=0.0, note=f"You hit and draw {card}.")
        return self._stand()

    @property
    def state(self) -> BlackjackState:
        return BlackjackState(
            episode_id=self._episode_id,
            step_count=self._steps,
            decks=self._decks,
            blackjack_payout=self._payout,
            seed=self._seed,
        )

    # -- rules ----------------------------------------------------------------------------------------

    def _draw(self) -> str:
        if self._decks == 0:
            return self._rng.choice(RANKS) + self._rng.choice(SUITS)
        if not self._shoe:  # a long hand emptied the shoe: reshuffle a fresh one
            self._shoe = [r + s for r in RANKS for s in SUITS] * self._decks
            self._rng.shuffle(self._shoe)
        return self._shoe.pop()

    def _stand(self) -> BlackjackObservation:
        player, _ = hand_total(self._player)
        while hand_total(self._dealer)[0] < 17:
            self._dealer.append(self._draw())
        dealer, _ = hand_total(self._dealer)
        note = f"You stand on {player}. The dealer has {dealer}{', bust' if dealer > 21 else ''}."
        p_nat, d_nat = is_natural(self._player), is_natural(self._dealer)
        if p_nat and not d_nat:
            return self._finish("blackjack", note)
        if d_nat and not p_nat:
            return self._finish("loss", note + " The dealer has blackjack.")
        if dealer > 21 or player > dealer:
            return self._finish("win", note)
        if player == dealer:
            return self._finish("push", note)
        return self._finish("loss", note)

    def _finish(self, outcome: str, note: str) -> BlackjackObservation:
        self._outcome = outcome
        reward = {"win": 1.0, "blackjack": self._payout, "push": 0.0, "loss": -1.0}[outcome]
        return self._observe(reward=reward, note=note)

    def render(self) -> tuple[str, str]:
        """The table as an SVG picture: the dealer's cards (one face down until the end), then yours."""
        over = self._outcome is not None
        dealer = list(self._dealer) if over else [*self._dealer[:1], "?"]
        width = 110 + 66 * max(len(dealer), len(self._player), 4)
        parts = [f'<rect width="{width}" height="250" rx="12" fill="#1f6b3a"/>']
        for y, label, cards in ((20, "Dealer", dealer), (135, "You", self._player)):
            total = hand_total([c for c in cards if c != "?"])[0]
            parts.append(
                f'<text x="16" y="{y + 42}" font-size="16" fill="#fff" font-family="sans-serif">{label}</text>'
            )
            parts.append(
                f'<text x="16" y="{y + 64}" font-size="14" fill="#d8f0dd" font-family="sans-serif">{total}</text>'
            )
            for i, card in enumerate(cards):
                x = 90 + 66 * i
                if card == "?":
                    parts.append(
                        f'<rect x="{x}" y="{y}" width="58" height="86" rx="6" fill="#8b1e2d" stroke="#fff" stroke-width="2"/>'
                    )
                    continue
                colour = "#c0392b" if card[-1] in "♥♦" else "#111"
                parts.append(f'<rect x="{x}" y="{y}" width="58" height="86" rx="6" fill="#fff" stroke="#333"/>')
                parts.append(
                    f'<text x="{x + 29}" y="{y + 52}" font-size="24" text-anchor="middle" fill="{colour}" '
                    f'font-family="sans-serif">{card}</text>'
                )
        if over:
            result = {"win": "You win", "blackjack": "Blackjack!", "push": "Push", "loss": "You lose"}[
                self._outcome or "push"
            ]
            parts.append(
                f'<text x="{width - 16}" y="240" font-size="16" text-anchor="end" fill="#ffe27a" font-family="sans-serif">{result}</text>'
            )
        return "image/svg+xml", (
            f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} 250" width="{width}" height="250">'
            f"<title>blackjack table</title>{''.join(parts)}</svg>"
        )

    def _observe(self, reward: float | None, note: str) -> BlackjackObservation:
        over = self._outcome is not None
        total, soft = hand_total(self._player)
        dealer_cards = list(self._dealer) if over else self._dealer[:1]
        dealer_total = hand_total(dealer_cards)[0]
        return BlackjackObservation(
            text=self._describe(note, total, soft, dealer_cards, dealer_total),
            player_cards=list(self._player),
            player_total=total,
            usable_ace=soft,
            dealer_cards=dealer_cards,
            dealer_total=dealer_total,
            legal_actions=[] if over else ["hit", "stand"],
            outcome=self._outcome,  # type: ignore[arg-type]
            reward=reward,
            done=over,
        )

    def _describe(self, note: str, total: int, soft: bool, dealer_cards: list[str], dealer_total: int) -> str:
        hand = f"Your hand: {' '.join(self._player)} (total {total}{', soft' if soft else ''})."
        if self._outcome is None:
            natural = " You have blackjack: stand to collect it." if is_natural(self._player) else ""
            return f"{note} {hand} The dealer shows {dealer_cards[0]}.{natural} Reply with one action: hit or stand."
        result = {
            "win": "You win (+1).",
            "blackjack": f"Blackjack! You win (+{self._payout:g}).",
            "push": "Push: your bet is returned (0).",
            "loss": "You lose (-1).",
        }[self._outcome]
        return f"{note} {hand} Dealer's hand: {' '.join(dealer_cards)} (total {dealer_total}). {result}"
