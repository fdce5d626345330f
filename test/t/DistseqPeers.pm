# Helpers for TAP tests with several distseq nodes on loopback TCP.
package DistseqPeers;

use strict;
use warnings;
use Exporter 'import';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;

our @EXPORT = qw(peer_node peer_server);

# A started node with distseq preloaded and installed, listening on
# 127.0.0.1 with trust for loopback connections (and "hba" lines first);
# install_path runs it on another PostgreSQL installation.
sub peer_node
{
	my ($name, %opts) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name,
		$opts{install_path} ? (install_path => $opts{install_path}) : ());

	$node->init(allows_streaming => 1);
	$node->append_conf('postgresql.conf', qq(
shared_preload_libraries = 'distseq'
listen_addresses = '127.0.0.1'
distseq.agent_interval = '200ms'
distseq.remote_timeout = '2s'
) . ($opts{conf} // ''));
	my $hba = slurp_file($node->data_dir . '/pg_hba.conf');
	open my $fh, '>', $node->data_dir . '/pg_hba.conf' or die;
	print $fh ($opts{hba} // '') . "host all all 127.0.0.1/32 trust\n$hba";
	close $fh;
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION distseq');
	return $node;
}

# On node $on, a foreign server "node_$to_name" reaching node $to, with a
# user mapping for the current user as the superuser.
sub peer_server
{
	my ($on, $to_name, $to) = @_;
	my $port = $to->port;

	$on->safe_psql('postgres', qq(
		CREATE SERVER node_$to_name FOREIGN DATA WRAPPER distseq
			OPTIONS (host '127.0.0.1', port '$port', dbname 'postgres');
		CREATE USER MAPPING FOR CURRENT_USER SERVER node_$to_name OPTIONS (user 'postgres');));
}

1;
