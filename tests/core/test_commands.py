from __future__ import annotations

import enum

import pytest

from toolcards.core import CommandNotRecognized, CommandRegistry, Rest


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


def note(title: str, body: Rest) -> str:
    """Save a note."""
    return f"{title}|{body}"


def add(a: int, b: int = 2, scale: float = 1.0) -> float:
    """Add two numbers."""
    return (a + b) * scale


def paint(color: Color, shiny: bool = False, tags: list[str] | None = None) -> str:
    """Paint."""
    return f"{color.value}:{shiny}:{tags}"


def boom() -> str:
    """Always fails."""
    raise RuntimeError("kaput")


async def later(text: str) -> str:
    """An async command."""
    return text[::-1]


@pytest.fixture
def registry() -> CommandRegistry:
    return CommandRegistry([note, add, paint, boom, later])


def test_positional_arguments_are_coerced_from_signature(registry: CommandRegistry) -> None:
    assert registry.dispatch("/add 3 4") == 7
    assert registry.dispatch("/add 3") == 5


def test_keyword_arguments_use_key_equals_value(registry: CommandRegistry) -> None:
    assert registry.dispatch("/add a=1 scale=0.5") == 1.5
    assert registry.dispatch("/add scale=2 5") == 14


def test_quoted_rest_of_line_text_is_kept_whole(registry: CommandRegistry) -> None:
    assert registry.dispatch('/note todo "buy milk, eggs"') == "todo|buy milk, eggs"
    assert registry.dispatch("/note todo buy  milk  now") == "todo|buy  milk  now"
    assert registry.dispatch('/note "two words" it\'s "fine"') == 'two words|it\'s "fine"'


def test_single_string_parameter_takes_the_whole_line(registry: CommandRegistry) -> None:
    assert registry.dispatch('/later "a b" c') == 'c "b a"'


def test_enums_bools_and_lists_are_coerced(registry: CommandRegistry) -> None:
    assert registry.dispatch("/paint red shiny=yes tags=a,b") == "red:True:['a', 'b']"


def test_unknown_command_raises_and_nothing_runs() -> None:
    ran: list[str] = []

    def spy() -> None:
        ran.append("x")

    registry = CommandRegistry([spy])
    with pytest.raises(CommandNotRecognized, match="nope"):
        registry.dispatch("/nope spy")
    assert ran == []


def test_command_failure_is_a_readable_string(registry: CommandRegistry) -> None:
    assert registry.dispatch("/boom") == "Command 'boom' failed: kaput"


def test_bad_argument_type_is_a_readable_failure(registry: CommandRegistry) -> None:
    result = registry.dispatch("/add three")
    assert isinstance(result, str) and result.startswith("Command 'add' failed:")
    assert "'a'" in result


def test_missing_and_extra_arguments_fail_readably(registry: CommandRegistry) -> None:
    assert "missing argument 'a'" in registry.dispatch("/add")
    assert "too many arguments" in registry.dispatch("/add 1 2 3 4")


def test_unbalanced_quotes_fail_readably(registry: CommandRegistry) -> None:
    assert registry.dispatch('/add "1 2').startswith("Command 'add' failed:")


@pytest.mark.anyio
async def test_async_dispatch_awaits_async_commands(registry: CommandRegistry) -> None:
    assert await registry.adispatch("/later abc") == "cba"


def test_sync_dispatch_runs_async_commands_outside_a_loop(registry: CommandRegistry) -> None:
    assert registry.dispatch("/later abc") == "cba"


def test_descriptors_describe_arguments(registry: CommandRegistry) -> None:
    by_name = {d.name: d for d in registry.descriptors()}
    add_args = {a.name: a for a in by_name["add"].args}
    assert add_args["a"].required and add_args["a"].type == "int"
    assert not add_args["b"].required and add_args["b"].default == 2
    assert by_name["note"].args[1].rest_of_line
    assert by_name["add"].description == "Add two numbers."


def test_duplicate_registration_is_rejected(registry: CommandRegistry) -> None:
    with pytest.raises(ValueError, match="already registered"):
        registry.register(add)


def test_is_command_detects_slash_lines() -> None:
    assert CommandRegistry.is_command("/help me")
    assert not CommandRegistry.is_command("/ not a command")
    assert not CommandRegistry.is_command("hello /x")
