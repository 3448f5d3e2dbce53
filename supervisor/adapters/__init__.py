"""A turn's tools as an agent framework's own tool objects, in-process: one module per
framework, each standing on ``supervisor.aio`` alone.

    from supervisor.adapters.pydantic_ai import SupervisedToolset
    from supervisor.adapters.langchain import SupervisedToolsMiddleware, tools_of
    from supervisor.adapters.openai_agents import SupervisedServer

Importing one of those modules loads its framework (an optional extra: ``pydantic-ai``,
``langchain``, ``openai-agents``); this package itself loads none, so ``import
supervisor`` never does. Every call goes through the turn it was shown in, so it keeps
everything a call gets: the frozen view, search and activation, validation, trust and
approvals, the envelope (``tool_output.py`` says what the model reads of it) and the
audit row. ``docs/turns.md`` says when each adapter begins a turn.
"""
