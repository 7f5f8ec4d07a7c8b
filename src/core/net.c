/*
 * net.c -- socket helpers (see net.h).
 */
#include "core/net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

lmc_status lmc_net_free_loopback_port(int *port, lmc_error *err)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return lmc_error_set(err, LMC_ERR_IO, "no free loopback port: socket: %s", strerror(errno));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    lmc_status st = LMC_OK;
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0)
        st = lmc_error_set(err, LMC_ERR_IO, "no free loopback port: bind: %s", strerror(errno));
    else if (getsockname(fd, (struct sockaddr *)&a, &len) != 0)
        st = lmc_error_set(err, LMC_ERR_IO, "no free loopback port: getsockname: %s",
                           strerror(errno));
    else
        *port = ntohs(a.sin_port);
    close(fd);
    return st;
}
