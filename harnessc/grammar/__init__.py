"""The grammars: roadmap.lark and rules.lark, and lark_parsers.py generated from them.

lark_parsers.py holds Lark's stand-alone LALR runtime and both grammars' parse tables;
`python -m harnessc.grammar.generate` rewrites it after a grammar changes (a test fails
until it does). harnessc needs lark only to regenerate it.
"""
