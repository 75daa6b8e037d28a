/* cmd_invite.c - `invite`: one line that lets another machine join this
 * node's network with `init --join` (invite.h). */
#include "cli.h"
#include "ctl.h"

#include "nightshift/config.h"
#include "nightshift/genesis.h"
#include "nightshift/identity.h"
#include "nightshift/invite.h"
#include "nightshift/mp.h"
#include "nightshift/util.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define S_DEFAULT_PEERS 3 /* live peers' addresses besides our own */

static const char s_usage[] =
    "usage: nightshift invite [--datadir D] [--peers N] [--json]\n"
    "\n"
    "Print one line that another machine passes to `nightshift init --join`\n"
    "to join this node's network: the network id (the hash of D/genesis.ini)\n"
    "and bootstrap addresses. The first is this node's own: ID@ the\n"
    "advertise endpoint when it is set, else the listen one; a wildcard\n"
    "listen host (0.0.0.0) becomes the first non-loopback IPv4 address of\n"
    "this machine, with a note on stderr (set --set node.advertise=\n"
    "tcp://HOST:PORT in init or config.ini to choose). When the node is\n"
    "running, up to N (default 3, at most 7) of its live provider peers\n"
    "follow, so the invitation still works while this node is down.\n"
    "--json prints invite, network_id and addresses.\n"
    "D defaults to $NIGHTSHIFT_DATADIR, else $XDG_DATA_HOME/nightshift, else\n"
    "~/.local/share/nightshift.\n";

/* The first IPv4 address of an interface that is up and not loopback. */
static int s_local_ipv4(char *out, size_t cap, char *ifname, size_t ifcap)
{
    struct ifaddrs *ifa = NULL;
    if (getifaddrs(&ifa) != 0)
        return NS_ERR_IO;
    int rc = NS_ERR_NOTFOUND;
    for (struct ifaddrs *i = ifa; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET ||
            !(i->ifa_flags & IFF_UP) || (i->ifa_flags & IFF_LOOPBACK))
            continue;
        const struct sockaddr_in *sin = (const void *)i->ifa_addr;
        if (inet_ntop(AF_INET, &sin->sin_addr, out, (socklen_t)cap)) {
            snprintf(ifname, ifcap, "%s", i->ifa_name);
            rc = NS_OK;
            break;
        }
    }
    freeifaddrs(ifa);
    return rc;
}

static bool s_loopback(const char *ep)
{
    return strncmp(ep, "tcp://127.", 10) == 0 ||
           strncmp(ep, "tcp://localhost:", 16) == 0 ||
           strncmp(ep, "tcp://[::1]:", 12) == 0;
}

/* Our own address: advertise, else the running node's endpoint
 * (node.addr: the real port of a listen port 0), else listen; a wildcard
 * host becomes this machine's address. */
static int s_own_address(const char *cmd, const char *datadir,
                         const ns_config_t *cfg, const char *idtext,
                         bool running, char *out, size_t cap)
{
    char ep[NS_ENDPOINT_MAX], path[PATH_MAX];
    snprintf(ep, sizeof ep, "%s",
             cfg->advertise[0] ? cfg->advertise : cfg->listen);
    uint8_t *text = NULL;
    size_t len = 0;
    if (!cfg->advertise[0] && running &&
        ns_path_join(path, sizeof path, datadir, "node.addr") == NS_OK &&
        ns_file_read(path, NS_ADDR_MAX, &text, &len) == NS_OK) {
        uint8_t pk[NS_ID_BYTES], mine[NS_ID_BYTES];
        char running_ep[NS_ENDPOINT_MAX];
        text[strcspn((char *)text, "\n")] = '\0';
        /* The node advertises 127.0.0.1 for a wildcard listen host; the
         * port is what we want from it. */
        if (ns_addr_parse((char *)text, pk, running_ep) == NS_OK &&
            ns_id_parse(idtext, mine) == NS_OK &&
            memcmp(pk, mine, NS_ID_BYTES) == 0) {
            const char *port = strrchr(running_ep, ':');
            const char *host_end = strrchr(ep, ':');
            if (ns_endpoint_wildcard(ep) && port && host_end)
                snprintf(ep + (host_end - ep),
                         sizeof ep - (size_t)(host_end - ep), "%s", port);
            else
                snprintf(ep, sizeof ep, "%s", running_ep);
        }
        free(text);
    }
    const char *port = strrchr(ep, ':');
    if (!port || strcmp(port, ":0") == 0 || strcmp(port, ":*") == 0) {
        ns_cli_error(cmd,
                     "the node listens on %s (a port chosen at start) and is "
                     "not running: start it, or set node.listen or "
                     "node.advertise to a fixed port",
                     ep);
        return 1;
    }
    if (ns_endpoint_wildcard(ep)) {
        char ip[64], ifname[IF_NAMESIZE + 1];
        if (s_local_ipv4(ip, sizeof ip, ifname, sizeof ifname) != NS_OK) {
            ns_cli_error(cmd,
                         "the node listens on %s and this machine has no "
                         "non-loopback IPv4 address to name: set --set "
                         "node.advertise=tcp://HOST:PORT",
                         ep);
            return 1;
        }
        fprintf(stderr,
                "note: the node listens on all interfaces; the invitation "
                "names %s (interface %s): set node.advertise=tcp://HOST:PORT "
                "to choose another\n",
                ip, ifname);
        char fixed[NS_ENDPOINT_MAX];
        snprintf(fixed, sizeof fixed, "tcp://%s%s", ip, port);
        snprintf(ep, sizeof ep, "%s", fixed);
    }
    if (cfg->reachable == NS_REACH_NO)
        fprintf(stderr,
                "note: this node cannot be dialled (node.reachable=no): a "
                "joiner can use the invitation's other addresses only; "
                "invite from a reachable node to be sure\n");
    snprintf(out, cap, "%s@%s", idtext, ep);
    return 0;
}

/* Up to want live provider peers of the running node. */
static void s_add_peers(const msgpack_object *doc, ns_invite_t *inv,
                        uint32_t want, bool own_loopback)
{
    if (doc->type != MSGPACK_OBJECT_ARRAY)
        return;
    uint32_t added = 0;
    for (uint32_t i = 0; i < doc->via.array.size && added < want &&
                         inv->n_addrs < NS_INVITE_MAX_ADDRS;
         i++) {
        const msgpack_object *p = &doc->via.array.ptr[i];
        const msgpack_object *id = ns_mp_obj_get(p, "id");
        const msgpack_object *ep = ns_mp_obj_get(p, "endpoint");
        const msgpack_object *role = ns_mp_obj_get(p, "role");
        if (!id || !ep || !role || id->type != MSGPACK_OBJECT_STR ||
            ep->type != MSGPACK_OBJECT_STR || role->type != MSGPACK_OBJECT_STR)
            continue;
        /* A requester is a light peer that leaves after its job. */
        if (role->via.str.size != 8 ||
            memcmp(role->via.str.ptr, "provider", 8) != 0)
            continue;
        char addr[NS_ADDR_MAX], endpoint[NS_ENDPOINT_MAX];
        uint8_t pk[NS_ID_BYTES];
        int n =
            snprintf(addr, sizeof addr, "%.*s@%.*s", (int)id->via.str.size,
                     id->via.str.ptr, (int)ep->via.str.size, ep->via.str.ptr);
        if (n < 0 || (size_t)n >= sizeof addr || strchr(addr, ',') ||
            ns_addr_parse(addr, pk, endpoint) != NS_OK ||
            ns_endpoint_wildcard(endpoint) ||
            (s_loopback(endpoint) && !own_loopback))
            continue;
        bool dup = false;
        for (uint32_t k = 0; k < inv->n_addrs; k++)
            dup = dup || strcmp(inv->addrs[k], addr) == 0;
        if (dup)
            continue;
        snprintf(inv->addrs[inv->n_addrs++], NS_ADDR_MAX, "%s", addr);
        added++;
    }
}

int ns_cmd_invite(int argc, char **argv)
{
    const char *cmd = "invite";
    if (ns_cli_wants_help(argc, argv)) {
        fputs(s_usage, stdout);
        return 0;
    }
    const char *datadir = NULL;
    uint64_t want_peers = S_DEFAULT_PEERS;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "--json") == 0) {
            json = 1;
            continue;
        }
        if (strcmp(argv[i], "--datadir") != 0 &&
            strcmp(argv[i], "--peers") != 0) {
            ns_cli_error(cmd, "unknown argument '%s' (see --help)", argv[i]);
            return 2;
        }
        if (!v) {
            ns_cli_error(cmd, "%s needs a value (see --help)", argv[i]);
            return 2;
        }
        if (strcmp(argv[i], "--datadir") == 0) {
            datadir = v;
        } else if (ns_parse_u64(v, &want_peers) != NS_OK ||
                   want_peers > NS_INVITE_MAX_ADDRS - 1) {
            ns_cli_error(cmd, "--peers: a number from 0 to %d",
                         NS_INVITE_MAX_ADDRS - 1);
            return 2;
        }
        i++;
    }
    int rc = ns_cli_datadir(cmd, &datadir, 0);
    if (rc)
        return rc;

    char path[PATH_MAX], err[512];
    ns_invite_t inv;
    memset(&inv, 0, sizeof inv);
    ns_genesis_t g;
    if (ns_path_join(path, sizeof path, datadir, "genesis.ini") != NS_OK ||
        ns_genesis_load(path, &g, err, sizeof err) != NS_OK) {
        ns_cli_error(cmd, "no usable genesis in %s: %s", datadir, err);
        return 1;
    }
    memcpy(inv.network_id, g.network_id, NS_HASH_BYTES);
    ns_genesis_release(&g);

    ns_identity_t *id = NULL;
    if (ns_path_join(path, sizeof path, datadir, "node.key") != NS_OK ||
        (rc = ns_identity_load(path, &id)) != NS_OK) {
        ns_cli_error(cmd, "cannot load %s: %s", path, ns_strerror(rc));
        return 1;
    }
    char idtext[NS_ID_TEXT_LEN + 1];
    ns_id_text(idtext, ns_identity_pk(id));
    ns_identity_destroy(&id);

    ns_config_t cfg;
    ns_config_defaults(&cfg);
    if (ns_path_join(path, sizeof path, datadir, "config.ini") == NS_OK &&
        access(path, F_OK) == 0 &&
        ns_config_load(&cfg, path, err, sizeof err) != NS_OK) {
        ns_cli_error(cmd, "%s", err);
        return 1;
    }

    /* The running node's live peers (and whether it runs at all). */
    uint8_t *doc = NULL;
    size_t len = 0;
    char *check = NULL;
    bool running =
        ns_ctl_query(datadir, "peers", &doc, &len, err, sizeof err) == NS_OK &&
        ns_mp_to_json(doc, len, &check, 0) == NS_OK;
    free(check);
    if ((rc = s_own_address(cmd, datadir, &cfg, idtext, running, inv.addrs[0],
                            NS_ADDR_MAX)) != 0) {
        free(doc);
        return rc;
    }
    inv.n_addrs = 1;
    if (running && want_peers > 0) {
        msgpack_unpacked up;
        msgpack_unpacked_init(&up);
        if (msgpack_unpack_next(&up, (const char *)doc, len, NULL) ==
            MSGPACK_UNPACK_SUCCESS)
            s_add_peers(&up.data, &inv, (uint32_t)want_peers,
                        s_loopback(strchr(inv.addrs[0], '@') + 1));
        msgpack_unpacked_destroy(&up);
    }
    free(doc);

    char text[NS_INVITE_MAX_LEN + 1];
    if ((rc = ns_invite_format(&inv, text, sizeof text)) != NS_OK) {
        ns_cli_error(cmd, "cannot write an invitation for %s: %s", inv.addrs[0],
                     ns_strerror(rc));
        return 1;
    }
    if (!json) {
        printf("%s\n", text);
        return 0;
    }
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    char net[2 * NS_HASH_BYTES + 1];
    ns_hex(net, inv.network_id, NS_HASH_BYTES);
    msgpack_pack_map(&pk, 3);
    ns_mp_str(&pk, "invite");
    ns_mp_str(&pk, text);
    ns_mp_str(&pk, "network_id");
    ns_mp_str(&pk, net);
    ns_mp_str(&pk, "addresses");
    msgpack_pack_array(&pk, inv.n_addrs);
    for (uint32_t i = 0; i < inv.n_addrs; i++)
        ns_mp_str(&pk, inv.addrs[i]);
    rc = ns_cli_print_json(sb.data, sb.size);
    msgpack_sbuffer_destroy(&sb);
    return rc;
}
