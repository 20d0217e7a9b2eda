// SPDX-License-Identifier: GPL-2.0-only
/*
 * devmemsim devices: the module parameters, module init/exit and the two
 * devices it makes.  Each net_device has a parent platform device
 * ("devmemsim.N") with a 64-bit DMA mask; dma-buf attachments map through
 * it, and with no IOMMU in front of it a DMA address is a physical address,
 * which dsim_dma_va() turns into the kernel address a "DMA" reads or
 * writes.  The devices are peers: what one sends the other receives.
 *
 * Copyright (c) the libdevmemtcp authors.
 */

#include "devmemsim.h"

#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/dma-mapping.h>
#include <linux/dma-direct.h>
#include <linux/etherdevice.h>
#include <linux/rtnetlink.h>
#include <net/page_pool/helpers.h>

static int num_queues = 16;
module_param(num_queues, int, 0444);
MODULE_PARM_DESC(num_queues, "RX and TX queues per device (1-64, default 16)");

static char *name0 = "dsim0";
module_param(name0, charp, 0444);
MODULE_PARM_DESC(name0, "name of the first device (default dsim0)");

static char *name1 = "dsim1";
module_param(name1, charp, 0444);
MODULE_PARM_DESC(name1, "name of the second device (default dsim1)");

static struct dsim_priv *dsim_privs[2];

/* Where a "DMA" of @len bytes at device address @dma lands, as a kernel
 * virtual address; NULL when it is not RAM.
 */
void *dsim_dma_va(struct dsim_priv *priv, dma_addr_t dma, unsigned int len)
{
	/* No IOMMU: the device address is the physical address. */
	phys_addr_t pa = dma_to_phys(&priv->pdev->dev, dma);

	if (!len || !pfn_valid(PHYS_PFN(pa)) || !pfn_valid(PHYS_PFN(pa + len - 1)))
		return NULL;
	return phys_to_virt(pa);
}

static struct platform_device *dsim_pdev_create(int id)
{
	struct platform_device *pdev;
	int err;

	pdev = platform_device_register_simple(DSIM_DRV_NAME, id, NULL, 0);
	if (IS_ERR(pdev))
		return pdev;
	/* 64-bit DMA, no IOMMU: DMA address == physical address */
	err = dma_coerce_mask_and_coherent(&pdev->dev, DMA_BIT_MASK(64));
	if (err) {
		platform_device_unregister(pdev);
		return ERR_PTR(err);
	}
	return pdev;
}

/* Defaults: rings 1024, header split off, hds-thresh 256, ntuple on. */
static void dsim_priv_init(struct dsim_priv *priv, struct net_device *dev,
			   struct platform_device *pdev)
{
	priv->dev = dev;
	priv->pdev = pdev;
	priv->nq = num_queues;
	priv->rx_ring = DSIM_RING_DEFAULT;
	priv->tx_ring = DSIM_RING_DEFAULT;
	priv->hds = false;
#if DSIM_HAVE_HDS_THRESH
	priv->hds_thresh = DSIM_HDS_THRESH_DEFAULT;
	dev->cfg->hds_thresh = DSIM_HDS_THRESH_DEFAULT;
#else
	priv->hds_thresh = 0;
#endif
	spin_lock_init(&priv->cfg_lock);
	spin_lock_init(&priv->fault_lock);
	atomic_set(&priv->fail_restart, 0);
	atomic_set(&priv->fail_alloc, 0);
	netdev_rss_key_fill(priv->key, sizeof(priv->key));
	dsim_fill_indir(priv->indir, num_queues);
	eth_hw_addr_random(dev);
}

static int dsim_queues_init(struct dsim_priv *priv)
{
	unsigned int i;

	priv->rq = kcalloc(priv->nq, sizeof(*priv->rq), GFP_KERNEL);
	priv->tq = kcalloc(priv->nq, sizeof(*priv->tq), GFP_KERNEL);
	if (!priv->rq || !priv->tq) {
		kfree(priv->rq);
		kfree(priv->tq);
		return -ENOMEM;
	}
	for (i = 0; i < priv->nq; i++) {
		struct dsim_rq *rq = &priv->rq[i];

		rq->priv = priv;
		rq->idx = i;
		skb_queue_head_init(&rq->backlog);
		u64_stats_init(&rq->stats.syncp);
		u64_stats_init(&priv->tq[i].stats.syncp);
		netif_napi_add(priv->dev, &rq->napi, dsim_poll);
	}
	return 0;
}

static struct dsim_priv *dsim_create(const char *name, int id)
{
	struct platform_device *pdev;
	struct net_device *dev;
	struct dsim_priv *priv;
	int err;

	pdev = dsim_pdev_create(id);
	if (IS_ERR(pdev))
		return ERR_CAST(pdev);
	dev = alloc_netdev_mqs(sizeof(*priv), name, NET_NAME_USER, dsim_setup,
			       num_queues, num_queues);
	if (!dev) {
		err = -ENOMEM;
		goto err_pdev;
	}
	SET_NETDEV_DEV(dev, &pdev->dev);
	priv = netdev_priv(dev);
	dsim_priv_init(priv, dev, pdev);
	err = dsim_queues_init(priv);
	if (err)
		goto err_netdev;
	return priv;

err_netdev:
	free_netdev(dev);
err_pdev:
	platform_device_unregister(pdev);
	return ERR_PTR(err);
}

static void dsim_free(struct dsim_priv *priv)
{
	struct platform_device *pdev = priv->pdev;
	unsigned int i;

	for (i = 0; i < priv->nq; i++) {
		netif_napi_del(&priv->rq[i].napi);
		skb_queue_purge(&priv->rq[i].backlog);
		/* 6.12 can leave a pool behind on a closed device */
		if (priv->rq[i].pp)
			page_pool_destroy(priv->rq[i].pp);
	}
	kfree(priv->rq);
	kfree(priv->tq);
	free_netdev(priv->dev);
	platform_device_unregister(pdev);
}

static int dsim_register_pair(void)
{
	int err;

	err = register_netdev(dsim_privs[0]->dev);
	if (err)
		return err;
	err = register_netdev(dsim_privs[1]->dev);
	if (err) {
		unregister_netdev(dsim_privs[0]->dev);
		return err;
	}
	netif_carrier_on(dsim_privs[0]->dev);
	netif_carrier_on(dsim_privs[1]->dev);
	return 0;
}

static int __init dsim_init(void)
{
	int err, i;

	if (num_queues < 1 || num_queues > DSIM_MAX_QUEUES) {
		pr_err("num_queues must be 1..%d\n", DSIM_MAX_QUEUES);
		return -EINVAL;
	}

	for (i = 0; i < 2; i++) {
		dsim_privs[i] = dsim_create(i ? name1 : name0, i);
		if (IS_ERR(dsim_privs[i])) {
			err = PTR_ERR(dsim_privs[i]);
			dsim_privs[i] = NULL;
			goto err_free;
		}
	}
	rcu_assign_pointer(dsim_privs[0]->peer, dsim_privs[1]);
	rcu_assign_pointer(dsim_privs[1]->peer, dsim_privs[0]);

	err = dsim_register_pair();
	if (err)
		goto err_free;

	dsim_debugfs_init();
	dsim_debugfs_add(dsim_privs[0]);
	dsim_debugfs_add(dsim_privs[1]);
	pr_info("created %s and %s with %d queues each\n",
		netdev_name(dsim_privs[0]->dev), netdev_name(dsim_privs[1]->dev),
		num_queues);
	return 0;

err_free:
	for (i = 0; i < 2; i++)
		if (dsim_privs[i])
			dsim_free(dsim_privs[i]);
	return err;
}

static void __exit dsim_exit(void)
{
	LIST_HEAD(list);
	int i;

	dsim_debugfs_exit();

	RCU_INIT_POINTER(dsim_privs[0]->peer, NULL);
	RCU_INIT_POINTER(dsim_privs[1]->peer, NULL);
	synchronize_net();

	rtnl_lock();
	unregister_netdevice_queue(dsim_privs[0]->dev, &list);
	unregister_netdevice_queue(dsim_privs[1]->dev, &list);
	unregister_netdevice_many(&list);
	rtnl_unlock();

	for (i = 0; i < 2; i++)
		dsim_free(dsim_privs[i]);
}

module_init(dsim_init);
module_exit(dsim_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("Simulated Ethernet NIC pair with devmem TCP (netmem RX/TX) support");
MODULE_AUTHOR("libdevmemtcp authors");
