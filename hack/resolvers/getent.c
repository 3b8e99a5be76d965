/*
 * getent for the conformance images' "musl" querier: upstream agnhost is Alpine, whose getent
 * resolves through musl, and the DNS tests ask it `getent hosts NAME`. Debian has no musl getent,
 * so this one is built here, statically against musl (Debian's musl-tools), and takes glibc's
 * place in our agnhost image. It is not Alpine's getent: it knows the hosts database only, and
 * resolves with musl's getaddrinfo (/etc/hosts, then DNS through /etc/resolv.conf).
 *
 *   getent hosts NAME...   "ADDRESS NAME" for each address of each name
 *
 * Exit status as getent's: 0 when every name was found, 2 when one was not, 1 for bad usage.
 */
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <netinet/in.h>

static int hosts(const char *name)
{
	struct addrinfo hints, *res, *ai;
	memset(&hints, 0, sizeof hints);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_CANONNAME;
	if (getaddrinfo(name, NULL, &hints, &res) != 0)
		return 2;
	const char *canonical = res->ai_canonname ? res->ai_canonname : name;
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		char text[INET6_ADDRSTRLEN];
		const void *addr = ai->ai_family == AF_INET
			? (const void *)&((struct sockaddr_in *)ai->ai_addr)->sin_addr
			: (const void *)&((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr;
		if (inet_ntop(ai->ai_family, addr, text, sizeof text) != NULL)
			printf("%-15s %s\n", text, canonical);
	}
	freeaddrinfo(res);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 3 || strcmp(argv[1], "hosts") != 0) {
		fprintf(stderr, "usage: getent hosts NAME... (this getent knows the hosts database only)\n");
		return 1;
	}
	int status = 0;
	for (int i = 2; i < argc; i++)
		if (hosts(argv[i]) != 0)
			status = 2;
	return status;
}
