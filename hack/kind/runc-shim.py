#!/usr/bin/python3
"""An OCI runtime in front of runc for hosts whose capability bounding set lacks some
capabilities (these VMs lack CAP_SYS_RESOURCE): Docker asks for every capability on a
``--privileged`` container, and runc fails with "unable to apply caps" on one the host
cannot grant. This drops such capabilities from the bundle's config.json (create, run)
and from the process file (exec), then execs runc unchanged. hack/kind/docker.sh
installs it as Docker's default runtime only where a capability is missing.
"""

import json
import os
import sys

RUNC = os.environ.get("KOOPER_RUNC", "/usr/sbin/runc")
CAP_NAMES = (  # capability number -> name, as in linux/capability.h
    "CHOWN DAC_OVERRIDE DAC_READ_SEARCH FOWNER FSETID KILL SETGID SETUID SETPCAP "
    "LINUX_IMMUTABLE NET_BIND_SERVICE NET_BROADCAST NET_ADMIN NET_RAW IPC_LOCK IPC_OWNER "
    "SYS_MODULE SYS_RAWIO SYS_CHROOT SYS_PTRACE SYS_PACCT SYS_ADMIN SYS_BOOT SYS_NICE "
    "SYS_RESOURCE SYS_TIME SYS_TTY_CONFIG MKNOD LEASE AUDIT_WRITE AUDIT_CONTROL SETFCAP "
    "MAC_OVERRIDE MAC_ADMIN SYSLOG WAKE_ALARM BLOCK_SUSPEND AUDIT_READ PERFMON BPF "
    "CHECKPOINT_RESTORE"
).split()


def missing() -> set[str]:
    with open("/proc/self/status") as status:
        bounding = next(int(line.split()[1], 16) for line in status if line.startswith("CapBnd:"))
    return {"CAP_" + name for bit, name in enumerate(CAP_NAMES) if not bounding >> bit & 1}


def strip(caps: dict, drop: set[str]) -> None:
    for key in ("bounding", "effective", "inheritable", "permitted", "ambient"):
        if caps.get(key):
            caps[key] = [cap for cap in caps[key] if cap not in drop]


def edit(path: str, process_file: bool) -> None:
    with open(path) as f:
        doc = json.load(f)
    caps = doc.get("capabilities") if process_file else doc.get("process", {}).get("capabilities")
    if caps:
        strip(caps, missing())
        with open(path, "w") as f:
            json.dump(doc, f)


def main(argv: list[str]) -> None:
    args = argv[1:]
    command = next((a for a in args if not a.startswith("-") and a in ("create", "run", "exec")), None)
    try:
        if command in ("create", "run"):
            bundle = args[args.index("--bundle") + 1] if "--bundle" in args else "."
            edit(os.path.join(bundle, "config.json"), process_file=False)
        elif command == "exec" and "--process" in args:
            edit(args[args.index("--process") + 1], process_file=True)
    except (OSError, ValueError, IndexError) as exc:
        print(f"kooper runc shim: {exc}", file=sys.stderr)
    os.execv(RUNC, [RUNC, *args])


if __name__ == "__main__":
    main(sys.argv)
