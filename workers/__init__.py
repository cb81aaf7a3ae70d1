"""The worker side of bench: runs one configuration inside one framework's environment.

Everything in this package except ``adapters/<framework>/`` is standard library only and must
stay parseable by Python 3.6 (Singa's interpreter): no dataclasses, f-strings are fine, no walrus.
"""
