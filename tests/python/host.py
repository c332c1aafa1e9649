"""A real third-party host: CPython driving .NET (10 in the tests) through pythonnet.

Usage: host.py DOTNET_ROOT PYHELPER_DLL [READY_FILE STOP_FILE]

Loads the runtime of DOTNET_ROOT through pythonnet (hostfxr), does a fixed
amount of .NET work and prints its own account of it: calls of
PyHelper.Helper::Marked, PyHelper.Marker objects it made .NET allocate,
FormatExceptions .NET threw and Python caught. With READY_FILE and STOP_FILE
it then writes its pid to READY_FILE and waits until STOP_FILE exists (for an
attach). It never shuts the runtime down: pythonnet does not, so a profiler's
Shutdown callback never comes.
"""

import json
import os
import sys
import tempfile
import time

MARKED_DIRECT = 123
MARKED_PER_TASK = 10
TASKS = 8
MARKERS_DIRECT = 40
MARKERS_MADE = 60
FORMAT_EXCEPTIONS = 25


def main():
    dotnet_root, helper = sys.argv[1], os.path.abspath(sys.argv[2])
    ready = sys.argv[3] if len(sys.argv) > 4 else None
    stop = sys.argv[4] if len(sys.argv) > 4 else None

    version = sorted(os.listdir(os.path.join(dotnet_root, "shared", "Microsoft.NETCore.App")))[-1]
    config = {
        "runtimeOptions": {
            "tfm": "net" + ".".join(version.split(".")[:2]),
            "framework": {"name": "Microsoft.NETCore.App", "version": version},
            "configProperties": {"System.Globalization.Invariant": True},
        }
    }
    runtime_config = os.path.join(tempfile.mkdtemp(prefix="clrprof-py-"), "host.runtimeconfig.json")
    with open(runtime_config, "w") as f:
        json.dump(config, f)

    from pythonnet import load

    load("coreclr", dotnet_root=dotnet_root, runtime_config=runtime_config)
    import clr

    clr.AddReference("System.Text.Json")
    clr.AddReference("System.Text.RegularExpressions")
    clr.AddReference("System.Security.Cryptography")
    clr.AddReference(helper)
    from System import Action, FormatException, GC, Int32, String
    from System.Collections.Generic import Dictionary
    from System.Security.Cryptography import SHA256
    from System.Text import Encoding, StringBuilder
    from System.Text.Json import JsonDocument
    from System.Text.RegularExpressions import Regex
    from System.Threading.Tasks import Task
    from PyHelper import Helper, Marker

    words = Dictionary[String, Int32]()
    for i in range(100):
        words["w%d" % i] = i
    sb = StringBuilder()
    for i in range(50):
        sb.Append("x").Append(i)
    matches = Regex.Matches(sb.ToString(), "x[0-9]+").Count
    doc = JsonDocument.Parse('{"values":[1,2,3,4]}')
    json_len = doc.RootElement.GetProperty("values").GetArrayLength()
    caught = 0
    for i in range(FORMAT_EXCEPTIONS):
        try:
            Int32.Parse("not a number %d" % i)
        except FormatException:
            caught += 1
    digest = bytes(SHA256.Create().ComputeHash(Encoding.UTF8.GetBytes("clrprof"))).hex()

    total = 0
    for i in range(MARKED_DIRECT):
        total += Helper.Marked(i)

    def task_body():
        for i in range(MARKED_PER_TASK):
            Helper.Marked(i)

    tasks = [Task.Run(Action(task_body)) for _ in range(TASKS)]
    Task.WaitAll(tasks)

    kept = [Marker() for _ in range(MARKERS_DIRECT)]
    Helper.MakeMarkers(MARKERS_MADE)
    GC.Collect()

    print("dictionary entries = %d" % words.Count)
    print("regex matches = %d" % matches)
    print("json values = %d" % json_len)
    print("sha256 = %s" % digest)
    print("tasks = %d" % TASKS)
    print("called PyHelper.Helper::Marked x %d" % (MARKED_DIRECT + TASKS * MARKED_PER_TASK))
    print("allocated PyHelper.Marker x %d" % (len(kept) + MARKERS_MADE))
    print("caught System.FormatException x %d" % caught)
    sys.stdout.flush()

    if ready and stop:
        with open(ready + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.replace(ready + ".tmp", ready)
        while not os.path.exists(stop):
            time.sleep(0.02)
            Helper.Marked(0)
        print("stopped")


if __name__ == "__main__":
    main()
