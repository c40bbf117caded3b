"""gaugebook.engine"""
