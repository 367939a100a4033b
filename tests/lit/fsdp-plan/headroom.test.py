"""usage: headroom.test.py CLUSTER OUT VALUE

Writes CLUSTER to OUT with its reserved_bytes replaced by VALUE (JSON text),
on the line where reserved_bytes begins, the rest of the file as it was.
"""
import re
import sys

src, out, value = sys.argv[1:4]
text = open(src).read()
start = text.index('  "reserved_bytes": ')
# The value ends where the next top-level key begins.
end = re.compile(r'\n  "[a-z_]+": ').search(text, start + 1).start()
new = text[:start] + '  "reserved_bytes": ' + value + "," + text[end:]
open(out, "w").write(new)
