"""The sans-IO reference node: inputs in, commands out.

Nothing in this package touches sockets, files, clocks, randomness, asyncio or simpy;
`now` and fresh identifiers arrive as inputs (see `bench.core.inputs`).
"""
