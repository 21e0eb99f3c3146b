"""``lcr index ... --estimate``: what a build will cost, before paying for any of it.

``figures`` holds the pure records each method's ``estimate`` hook returns;
``tokenizers`` loads a model's tokenizer alone (no weights); ``throughput``
measures and remembers how fast a backend reads and writes tokens here;
``plan`` joins them into per-method figures; the CLI prints them.
"""
