"""gaugebook.present"""
