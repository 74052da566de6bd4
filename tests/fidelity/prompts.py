"""Realistic system prompts from many domains, with times, dates and numbers as *data*.

Each ``Prompt`` renders the system text of one turn, ``live=False`` (nothing changes during the
conversation: nothing may move) or ``live=True`` (one value changes the way an application updates
it). ``moves`` is what the model must then read at the tail of the latest request: the unit that
changed, whole, under the heading it sat under. 12/24-hour, ISO and localized formats; English,
German, French, Spanish, Japanese.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Prompt:
    name: str
    render: Callable[[int, bool], str]
    #: The moved text expected on the last turn of a live conversation (``turn``), or ``None`` when the
    #: live variant only checks the fidelity rules.
    moves: Callable[[int], str] | None = None
    #: The request from which the system text is byte-stable (a self-labelled present: 0).
    stable_from: int = 1


def _calendar(turn: int, live: bool) -> str:
    review = f"{2 + (turn if live else 0) % 3}:15 PM" if live else "2:15 PM"
    return (
        "You are Ana's scheduling assistant. Answer with times in her time zone (CET).\n\n"
        "Today's meetings:\n"
        "- 9:30 AM Standup (room 4B)\n"
        "- 11:00 AM 1:1 with Priya\n"
        f"- {review} Design review\n"
        "- 4:45 PM Call with Contoso\n\n"
        "Never book over lunch (12:00-13:00)."
    )


def _hours(turn: int, live: bool) -> str:
    wait = 4 + turn if live else 4
    return (
        "Du bist der Kundendienst der Bäckerei Huber in München.\n"
        "Öffnungszeiten:\n"
        "  Mo\u2013Fr 06:30\u201318:00\n"
        "  Sa 07:00\u201313:00\n"
        "  So geschlossen\n"
        f"Wartezeit an der Theke: {wait} Minuten\n"
        "Antworte freundlich und auf Deutsch."
    )


def _log(turn: int, live: bool) -> str:
    latency = 412 + 17 * turn if live else 412
    return (
        "You triage production incidents for the checkout service.\n"
        "Last deploy log:\n"
        "2026-11-23T09:58:02Z INFO deploy started (build 8812)\n"
        "2026-11-23T09:59:47Z WARN cache warmup slow: 1.8s\n"
        "2026-11-23T10:00:13Z INFO deploy finished\n"
        f"Monitoring: 3 alerts open, p95 latency {latency} ms\n"
        "Answer in short bullet points."
    )


def _flight(turn: int, live: bool) -> str:
    record = {
        "pnr": "C46E9F",
        "flight": "LX0112",
        "departure": "2024-10-09T08:05:00+02:00",
        "arrival": "2024-10-09T09:35:00+02:00",
        "seat": "18E",
        "status_checked_at": f"2024-10-09T07:{12 + (turn if live else 0):02d}:00+02:00",
    }
    return (
        "You are a customer support assistant for Swiss Airlines.\n"
        "Booking on file:\n"
        f"{json.dumps(record, indent=2)}\n"
        "Help the traveller with changes and refunds."
    )


def _flight_moves(turn: int) -> str:
    text = _flight(turn, True).split("\n")
    return "\n".join(text[1:10]) + "\n"


def _ticket(turn: int, live: bool) -> str:
    clock = f"\nCurrent time: 2024-10-09 08:{4 + turn:02d}:06.583272." if live else ""
    return (
        "You are a helpful customer support assistant for Swiss Airlines.\n\n"
        "Current user flight information:\n<Flights>\n"
        "[{'ticket_no': '7240005432906569', 'flight_no': 'LX0112', 'departure_airport': 'CDG', "
        "'scheduled_departure': '2024-10-09 08:04:57.056535-04:00', "
        "'scheduled_arrival': '2024-10-09 09:34:57.056535-04:00', 'seat_no': '18E'}]\n"
        f"</Flights>{clock}"
    )


def _config(turn: int, live: bool) -> str:
    replicas = 3 + turn if live else 3
    return (
        "You review deployment configs. Point out risky settings.\n"
        "service:\n"
        "  name: checkout\n"
        f"  replicas: {replicas}\n"
        "  timeout: 00:00:30\n"
        '  maintenance_window: "Sun 02:00-04:00"\n'
        "Reply in English."
    )


def _table(turn: int, live: bool) -> str:
    delay = f"+{5 * turn} min" if live else "à l'heure"
    return (
        "Tu es l'assistant des voyageurs de la gare de Lyon Part-Dieu.\n"
        "| Train | Départ | Arrivée | État |\n"
        "|---|---|---|---|\n"
        "| TGV 6201 | 07:04 | 09:01 | à l'heure |\n"
        f"| TER 17305 | 07:32 | 08:58 | {delay} |\n"
        "Réponds en français."
    )


def _table_moves(turn: int) -> str:
    text = _table(turn, True).split("\n")
    return "\n".join([text[1], text[2], text[4]]) + "\n"


def _code(turn: int, live: bool) -> str:
    retry = f"10:{15 + (turn if live else 0):02d}"
    return (
        "You maintain the billing job.\n"
        "Project constants:\n"
        "```python\n"
        "TIMEOUT_S = 30\n"
        f'RETRY_AT = "{retry}"\n'
        "```\n"
        "Explain changes before making them."
    )


def _code_moves(turn: int) -> str:
    text = _code(turn, True).split("\n")
    return "\n".join(text[1:6]) + "\n"


def _prose(turn: int, live: bool) -> str:
    return (
        "Eres el asistente de la clínica San Rafael.\n"
        "La próxima revisión del paciente es el 14/12/2026 a las 10:30.\n"
        "会議は2026年11月23日 14:30から始まります。\n"
        "The pharmacy closes at 9 pm on weekdays; prescriptions issued after 6:45 pm are ready next day.\n"
        "Responde siempre con cortesía."
    )


def _git(turn: int, live: bool) -> str:
    modified = 3 + turn if live else 3
    return (
        "git status:\n"
        "  branch: main\n"
        f"  {modified} modified, 2 untracked\n"
        "You are a coding agent working in this repository."
    )


def _git_moves(turn: int) -> str:
    return f"git status:\n  {3 + turn} modified, 2 untracked\n"


def _present(turn: int, live: bool) -> str:
    minute = 2 + 7 * turn if live else 2
    return f"You are a travel agent.\nCurrent date and time: 2026-11-23 10:{minute:02d}\nBe concise."


def _present_fr(turn: int, live: bool) -> str:
    minute = 2 + 7 * turn if live else 2
    return f"Tu es un agent de voyage.\nHeure actuelle : 10:{minute:02d}\nSois concis."


PROMPTS = [
    Prompt("calendar-12h", _calendar, lambda t: f"Today's meetings:\n- {2 + t % 3}:15 PM Design review\n"),
    Prompt("store-hours-de", _hours, lambda t: f"Wartezeit an der Theke: {4 + t} Minuten\n"),
    Prompt("log-excerpt", _log, lambda t: f"Monitoring: 3 alerts open, p95 latency {412 + 17 * t} ms\n"),
    Prompt("flight-json", _flight, _flight_moves),
    Prompt("ticket-record", _ticket, lambda t: f"Current time: 2024-10-09 08:{4 + t:02d}:06.583272.\n\n", 0),
    Prompt("config-yaml", _config, lambda t: f"service:\n  replicas: {3 + t}\n"),
    Prompt("timetable-fr", _table, _table_moves),
    Prompt("code-fence", _code, _code_moves),
    Prompt("prose-dates-es-ja", _prose, None),
    Prompt("git-status", _git, _git_moves),
    Prompt("present-en", _present, lambda t: f"Current date and time: 2026-11-23 10:{2 + 7 * t:02d}\n", 0),
    Prompt("present-fr", _present_fr, lambda t: f"Heure actuelle : 10:{2 + 7 * t:02d}\n", 0),
]

__all__ = ["PROMPTS", "Prompt"]
