/*
 * gai resolves NAME with the C library's getaddrinfo, as a C program in a pod does: through the
 * pod's /etc/resolv.conf (nameserver, search list, ndots) and /etc/hosts, for IPv4 and IPv6 at
 * once (AF_UNSPEC). Built twice (hack/conformance.mk): against glibc, and statically against musl
 * (Debian's musl-tools), so that the two resolvers pods really use can be asked the same question.
 *
 *   gai NAME    each address once, one a line, in the order getaddrinfo gives them
 *
 * On failure it prints the error's name (EAI_NONAME, EAI_AGAIN, ...) on stdout, the C library's
 * words for it on stderr, and exits 2.
 */
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <netinet/in.h>

static const char *eai_name(int err)
{
	switch (err) {
	case EAI_NONAME: return "EAI_NONAME";
	case EAI_AGAIN: return "EAI_AGAIN";
	case EAI_FAIL: return "EAI_FAIL";
#ifdef EAI_NODATA
	case EAI_NODATA: return "EAI_NODATA";
#endif
	case EAI_SYSTEM: return "EAI_SYSTEM";
	default: return "EAI_OTHER";
	}
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: gai NAME\n");
		return 1;
	}
	struct addrinfo hints, *res, *ai;
	memset(&hints, 0, sizeof hints);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM; /* one entry per address */
	int err = getaddrinfo(argv[1], NULL, &hints, &res);
	if (err != 0) {
		printf("%s\n", eai_name(err));
		fprintf(stderr, "gai %s: %s\n", argv[1], gai_strerror(err));
		return 2;
	}
	char seen[512][INET6_ADDRSTRLEN];
	int n = 0;
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		char text[INET6_ADDRSTRLEN];
		const void *addr = ai->ai_family == AF_INET
			? (const void *)&((struct sockaddr_in *)ai->ai_addr)->sin_addr
			: (const void *)&((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr;
		if (inet_ntop(ai->ai_family, addr, text, sizeof text) == NULL)
			continue;
		int dup = 0;
		for (int i = 0; i < n && !dup; i++)
			dup = strcmp(seen[i], text) == 0;
		if (dup || n == 512)
			continue;
		strcpy(seen[n++], text);
		printf("%s\n", text);
	}
	freeaddrinfo(res);
	return 0;
}
