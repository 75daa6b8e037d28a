/* cmd_worker.c - `nightshift worker`: the sandboxed process that compiles
 * and runs kernels for a supervisor (exec/worker.c). Internal: started by
 * `nightshift node` and `nightshift run` over a socketpair, never by hand.
 */
#include "cli.h"

#include "nightshift/worker.h"

static const char s_usage[] =
    "usage: nightshift worker --fd N [--device I] [--cache-dir DIR]\n"
    "                         [--mem-limit BYTES|unlimited] "
    "[--max-source BYTES]\n"
    "                         [--parent PID]\n"
    "\n"
    "Internal: the sandboxed process in which `node` and `run` compile and\n"
    "run kernels, so that a kernel that crashes, loops or exhausts memory\n"
    "takes down only this process. It speaks a private protocol on socket\n"
    "N (see docs/ARCHITECTURE.md, \"Sandbox\") and is not meant to be run\n"
    "by hand.\n"
    "\n"
    "  --fd N            the socket to the supervisor (inherited, N >= 3)\n"
    "  --device I        OpenCL device index, as `nightshift devices` lists\n"
    "  --cache-dir DIR   compiled program cache\n"
    "  --mem-limit B     address space allowed beyond what the OpenCL\n"
    "                    runtime took at start-up (default: physical memory)\n"
    "  --max-source B    largest kernel source accepted, bytes\n"
    "  --parent PID      exit at once if PID is no longer the parent\n"
    "  -h, --help        show this help\n"
    "\n"
    "Exit status: 0 when the supervisor closed the socket, 1 if the device\n"
    "cannot be opened, 2 on a usage error, 3 on a protocol violation.\n";

int ns_cmd_worker(int argc, char **argv)
{
    if (ns_cli_wants_help(argc, argv)) {
        fputs(s_usage, stdout);
        return 0;
    }
    return ns_worker_main(argc, argv);
}
